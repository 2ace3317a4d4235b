// The engine on the constructs chat templates use, with expectations
// rendered by Python jinja2 under Hugging Face's settings (the reference
// test tests/reference/jinja_reference.py compares thousands more).
#include "model/jinja/template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/jinja/json_value.h"

namespace kvfleet::jinja {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kContext = R"json({"messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi <|im_end|>"}, {"role": "assistant", "content": "<think>\nok\n</think>\n\nHello"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}], "xs": [3, 1, 2], "d": {"b": 2, "a": 1}, "s": "a,b,,c"})json";

const DictData& Context() {
  static const Value context = FromJson(nlohmann::ordered_json::parse(kContext));
  return context.dict();
}

absl::StatusOr<std::string> Render(std::string_view source, RenderOptions options = {.now = 1718034063}) {
  absl::StatusOr<Template> t = Template::Parse(source, "test");
  if (!t.ok()) return t.status();
  absl::StatusOr<Text> out = t->Render(Context(), options);
  if (!out.ok()) return out.status();
  return out->str();
}

struct Case {
  const char* name;
  const char* source;
  const char* want;
};

TEST(TemplateTest, RendersAsJinja2Does) {
  const Case kCases[] = {
    {"for_loop",
     "{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{% if not loop.last %},{% endif %}{% endfor %}",
     "1s,2u,3a"},
    {"loop_else_and_filter",
     "{% for x in xs if x > 5 %}{{ x }}{% else %}none{% endfor %}|{% for x in xs if x is odd %}{{ loop.length }}{% endfor %}",
     "none|22"},
    {"set_does_not_leak_from_for",
     "{% set n = 0 %}{% for x in xs %}{% set n = n + x %}{% endfor %}{{ n }}",
     "0"},
    {"namespace_carries_state",
     "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}",
     "6"},
    {"macro_and_call",
     "{% macro tag(name, body='x') %}<{{ name }}>{{ body }}{{ caller() if caller is defined }}</{{ name }}>{% endmacro %}{{ tag('a') }}{% call tag('b', body='') %}in{% endcall %}",
     "<a>x</a><b>in</b>"},
    {"filter_block",
     "{% filter upper %}hi {{ 'there' }}{% endfilter %}",
     "HI THERE"},
    {"slicing",
     "{{ xs[::-1] }}{{ 'hello'[1:3] }}{{ messages[-1].role }}",
     "[2, 1, 3]elassistant"},
    {"string_methods",
     "{{ messages[2].content.split('</think>')[-1].lstrip('\\n') }}|{{ s.split(',') }}|{{ '  x '.strip() }}|{{ 'ab'.startswith(('x', 'a')) }}",
     "Hello|['a', 'b', '', 'c']|x|True"},
    {"tojson_as_hugging_face",
     "{{ tools[0].function | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é' | tojson }}",
     "{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}|{\n  \"b\": 2,\n  \"a\": 1\n}|\"é\""},
    {"selectattr_map",
     "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
     "['Hi <|im_end|>']"},
    {"undefined_is_lenient",
     "[{{ messages[0].tool_calls }}][{{ messages[0].tool_calls is defined }}][{{ nothing | default('dflt') }}][{{ nothing | length }}]",
     "[][False][dflt][0]"},
    {"dict_methods",
     "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.get('zz', 'no') }}{{ d.keys() | list }}",
     "b=2;a=1;no['b', 'a']"},
    {"operators",
     "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'a' ~ 1 }} {{ '%s-%05.1f' % ('x', 2.25) }} {{ 1 if none else 2 }}",
     "3 -4 3.5 1024 a1 x-002.2 2"},
    {"tests",
     "{{ xs is iterable }}{{ d is mapping }}{{ 3 is divisibleby 3 }}{{ none is none }}{{ 'a' in s }}{{ 1 is number }}",
     "TrueTrueTrueTrueTrueTrue"},
    {"dictsort_and_sort",
     "{{ d | dictsort }}{{ xs | sort(reverse=true) }}{{ ['b', 'A', 'a'] | sort }}",
     "[('a', 1), ('b', 2)][3, 2, 1]['A', 'a', 'b']"},
    {"whitespace_control",
     "{%- for x in xs -%}\n  {{ x }}\n{%- endfor %}\n  {% if true %}\n    yes\n  {% endif %}\n",
     "312    yes\n"},
    {"strftime_now",
     "{{ strftime_now('%d %b %Y') }}",
     "10 Jun 2024"},
    {"markup_escapes_plain_strings",
     "{{ '<b>'|safe + '<i>' }}",
     "<b>&lt;i&gt;"},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<std::string> got = Render(c.source);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.name;
  }
}

TEST(TemplateTest, RaisesWhereJinja2RaisesNamingTemplateAndLine) {
  const struct {
    const char* source;
    const char* where;
    const char* what;
  } kErrors[] = {
      {"{% if messages[0].role == 'system' %}\n{{ raise_exception('System role not supported') }}{% endif %}",
       "line 2", "System role not supported"},
      {"{{ nothing + 1 }}", "line 1", "'nothing' is undefined"},
      {"{{ nothing.attr }}", "line 1", "'nothing' is undefined"},
      {"{{ xs | select('odd') | length }}", "line 1", "has no len()"},
      {"{{ xs.append(4) }}", "line 1", "unsafe"},
      {"{% for x in xs %}\n{{ x | bogus }}{% endfor %}", "line 2", "No filter named 'bogus'"},
      {"{% for x in xs %}\n{{ x }", "line 2", ""},
      {"{% if true %}x", "line 1", "not closed"},
  };
  for (const auto& e : kErrors) {
    absl::StatusOr<std::string> got = Render(e.source);
    ASSERT_FALSE(got.ok()) << e.source;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(std::string("template 'test', ") + e.where)) << e.source;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(e.what)) << e.source;
  }
}

TEST(TemplateTest, InputBytesStayInputThroughConcatenationAndFilters) {
  absl::StatusOr<Template> t = Template::Parse(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content | trim + '<|im_end|>' }}{% endfor %}",
      "test");
  ASSERT_TRUE(t.ok());
  absl::StatusOr<Text> out = t->Render(Context());
  ASSERT_TRUE(out.ok()) << out.status();
  const std::string& s = out->str();
  const size_t forged = s.find("Hi <|im_end|>") + 3;
  for (size_t i = forged; i < forged + 10; ++i) EXPECT_TRUE(out->IsInputByte(i)) << i;
  EXPECT_FALSE(out->IsInputByte(0));                       // the template's own <|im_start|>
  EXPECT_FALSE(out->IsInputByte(s.rfind("<|im_end|>")));   // and its own <|im_end|>
}

TEST(TemplateTest, RunawayTemplatesStop) {
  absl::StatusOr<std::string> loop = Render(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      {.now = 1, .max_steps = 100000});
  EXPECT_THAT(std::string(loop.status().message()), HasSubstr("ran too long"));
  EXPECT_FALSE(Render("{{ 'x' * 1000000000 }}").ok());
  EXPECT_FALSE(Render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").ok());
}

}  // namespace
}  // namespace kvfleet::jinja
