// Parses a token stream (lexer.h) into statements (ast.h), following
// jinja2's grammar and operator precedence: or < and < not < comparisons
// (==, !=, <, <=, >, >=, in, not in; chained) < + - < ~ < * / // % < ** <
// unary - + < postfix (.attr, [index], [a:b:c], call) < filters and tests.
// `a if b else c` wraps the whole. Statements: if/elif/else, for (tuple
// targets, loop filter, else, recursive), set (name, tuple, namespace
// attribute, block form), macro, call, filter, with, break, continue, and
// Hugging Face's {% generation %} (its body, as written).
//
// Thread-safety: a function of its input.
//
//   ASSIGN_OR_RETURN(Body body, Parse(tokens));
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace kvfleet::jinja {

// INVALID_ARGUMENT "line N: ..." for what jinja2 rejects as a syntax error,
// and for the tags chat templates cannot use (include, extends, import).
absl::StatusOr<Body> Parse(const std::vector<Token>& tokens);

}  // namespace kvfleet::jinja
