"""Small templates that each exercise one Jinja construct, for jinja_reference.py.

CONSTRUCTS render in jinja2 (configured as transformers does, jinja_hf.py) with
CONTEXT; the C++ engine must produce the same bytes. ERROR_CONSTRUCTS raise in
jinja2 (a syntax error, raise_exception, an undefined value used, a sandbox
refusal, ...); the C++ engine must report an error for them too, with any
message. jinja_reference.py checks that each list behaves as its name says, so
a construct that raises by accident is caught rather than counted as agreement.

Case changes stay within ASCII letters: Python upper-cases e-acute to E-acute and
sharp s to "SS"; kvfleet's engine changes ASCII letters only, by design
(model/jinja/unicode.h).

Nothing here prints an object's identity (`{{ xs|reverse }}`, a bare `map` or
`select` result print `<... object at 0x...>` in Python): those go through
`|list` or `|join`.
"""

CONTEXT = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi <b>there</b> & 'you'"},
        {"role": "assistant", "content": "  Hello!  ",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "Thanks\nbye"},
    ],
    "tools": [
        {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                          "parameters": {"type": "object",
                                                         "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]}}},
    ],
    "xs": [3, 1, 2],
    "ys": [],
    "d": {"b": 2, "a": 1, "C": 3},
    "s": "  Hello, World  ",
    "csv": "a,b,,c",
    "n": 7,
    "f": 2.5,
    "neg": -3,
    "zero": 0,
    "empty": "",
    "nothing": None,
    "yes": True,
    "no": False,
    "words": ["banana", "Apple", "cherry", "apple", "Banana"],
    "users": [{"name": "Ann", "age": 31, "admin": True},
              {"name": "bob", "age": 25, "admin": False},
              {"name": "Cy", "age": 40}],
    "nested": {"a": {"b": {"c": "deep"}}, "list": [{"k": 1}, {"k": 2}]},
    "text": "line one\nline two\r\nline three\n",
    "uni": "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c \U0001F600",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "add_generation_prompt": True,
}

# (name, template). Names are category.what.
CONSTRUCTS = [
    # --- if / elif / else -------------------------------------------------------------------------
    ("if.true", "{% if yes %}Y{% endif %}"),
    ("if.false_else", "{% if no %}Y{% else %}N{% endif %}"),
    ("if.elif_chain", "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %},"
                      "{% endfor %}"),
    ("if.truthiness", "{% for v in [0, 1, '', 'x', [], [0], {}, {'a': 1}, none, 0.0, true, false] %}"
                      "{% if v %}T{% else %}F{% endif %}{% endfor %}"),
    ("if.nested", "{% if yes %}{% if no %}a{% elif n > 5 %}b{% endif %}{% endif %}"),
    ("if.undefined_is_false", "{% if missing %}Y{% else %}N{% endif %}"),
    ("if.missing_key_is_false", "{% if messages[0].tool_calls %}Y{% else %}N{% endif %}"),
    ("if.inline_expr", "{{ 'big' if n > 5 else 'small' }}"),
    ("if.inline_no_else", "[{{ 'big' if n < 5 }}]"),
    ("if.inline_no_else_defined", "{{ ('x' if false) is defined }}"),
    # --- for -------------------------------------------------------------------------------------
    ("for.basic", "{% for x in xs %}{{ x }};{% endfor %}"),
    ("for.loop_index", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/"
                       "{{ loop.revindex0 }}/{{ loop.length }} {% endfor %}"),
    ("for.first_last", "{% for x in xs %}{% if loop.first %}[{% endif %}{{ x }}{% if not loop.last %}, "
                       "{% else %}]{% endif %}{% endfor %}"),
    ("for.previtem_nextitem", "{% for x in xs %}({{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}){% endfor %}"),
    ("for.previtem_defined", "{% for x in xs %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }} "
                             "{% endfor %}"),
    ("for.cycle", "{% for x in xs + xs %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}"),
    ("for.else_empty", "{% for x in ys %}{{ x }}{% else %}none{% endfor %}"),
    ("for.else_nonempty", "{% for x in xs %}{{ x }}{% else %}none{% endfor %}"),
    ("for.filter_if", "{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}"),
    ("for.filter_if_else", "{% for x in xs if x > 10 %}{{ x }}{% else %}nothing above 10{% endfor %}"),
    ("for.items_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"),
    ("for.dict_iterates_keys", "{% for k in d %}{{ k }}{% endfor %}"),
    ("for.string_iterates_chars", "{% for c in 'abc' %}{{ c }}.{% endfor %}"),
    ("for.tuple_unpack_list", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }} {% endfor %}"),
    ("for.nested_loop_vars", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}"
                             "{{ loop.index }}|{% endfor %}"),
    ("for.range", "{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}"
                  "|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}"),
    ("for.messages", "{% for m in messages %}{{ m.role }}:{{ m['content'] | length }} {% endfor %}"),
    ("for.undefined_iterates_nothing", "[{% for x in missing %}{{ x }}{% endfor %}]"),
    ("for.none_attr_of_dict", "[{% for c in messages[1].tool_calls %}{{ c }}{% endfor %}]"),
    ("for.loop_var_does_not_leak", "{% set x = 'outer' %}{% for x in xs %}{% endfor %}{{ x }}"),
    ("for.recursive", "{% for item in [{'n': 'a', 'c': [{'n': 'b', 'c': []}]}, {'n': 'c', 'c': []}] recursive %}"
                      "{{ loop.depth }}{{ item.n }}{% if item.c %}({{ loop(item.c) }}){% endif %}{% endfor %}"),
    ("for.changed", "{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}"),
    # --- break / continue ---------------------------------------------------------------------------
    ("loopctl.break", "{% for x in [1, 2, 3, 4] %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("loopctl.continue", "{% for x in [1, 2, 3, 4] %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
    ("loopctl.break_last", "{% for x in xs %}{{ x }}{{ loop.last }}{% break %}{% endfor %}"),
    # --- set / scoping -------------------------------------------------------------------------------
    ("set.simple", "{% set a = 'x' %}{% set b = a ~ 'y' %}{{ a }}{{ b }}"),
    ("set.tuple_unpack", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, e = [3, 4] %}{{ c }}{{ e }}"),
    ("set.block", "{% set block %}A {{ n }} B{% endset %}[{{ block }}]"),
    ("set.block_filtered", "{% set shout | upper %}quiet {{ n }}{% endset %}{{ shout }}"),
    ("set.block_whitespace", "{% set b %}\n  line\n{% endset %}[{{ b }}]"),
    ("set.in_for_does_not_leak", "{% set count = 0 %}{% for x in xs %}{% set count = count + 1 %}{% endfor %}"
                                 "{{ count }}"),
    ("set.in_if_leaks", "{% if yes %}{% set v = 'set in if' %}{% endif %}{{ v }}"),
    ("set.in_for_visible_in_iteration", "{% for x in xs %}{% set y = x * 2 %}{{ y }}{% endfor %}[{{ y }}]"),
    ("set.namespace", "{% set ns = namespace(count=0, names=[]) %}{% for x in xs %}{% set ns.count = ns.count + x %}"
                      "{% endfor %}{{ ns.count }}"),
    ("set.namespace_flag", "{% set ns = namespace(found=false) %}{% for m in messages %}{% if m.role == 'tool' %}"
                           "{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}"),
    ("set.namespace_list_concat", "{% set ns = namespace(acc=[]) %}{% for x in xs %}{% set ns.acc = ns.acc + [x] %}"
                                  "{% endfor %}{{ ns.acc }}"),
    ("set.namespace_attr_read", "{% set ns = namespace(a=1) %}{{ ns.a }}{{ ns.b is defined }}"),
    ("set.shadow_context", "{% set n = 'shadow' %}{{ n }}"),
    ("set.messages_slice", "{% set loop_messages = messages[1:] %}{{ loop_messages | length }}"),
    ("set.in_macro_local", "{% macro m() %}{% set z = 1 %}{{ z }}{% endmacro %}{{ m() }}[{{ z }}]"),
    # --- macros / call blocks -------------------------------------------------------------------------
    ("macro.basic", "{% macro greet(name) %}Hi {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bo') }}"),
    ("macro.defaults", "{% macro f(a, b=2, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, 3) }} "
                       "{{ f(1, c='q') }}"),
    ("macro.kwargs", "{% macro f(a) %}{{ a }}{% for k, v in kwargs.items() %} {{ k }}={{ v }}{% endfor %}"
                     "{% endmacro %}{{ f(1, x=2, y=3) }}"),
    ("macro.varargs", "{% macro f(a) %}{{ a }}{{ varargs }}{% endmacro %}{{ f(1, 2, 3) }}"),
    ("macro.missing_arg_undefined", "{% macro f(a, b) %}[{{ a }}|{{ b }}|{{ b is defined }}]{% endmacro %}{{ f(1) }}"),
    ("macro.sees_globals", "{% macro f() %}{{ n }}{{ bos_token }}{% endmacro %}{{ f() }}"),
    ("macro.recursive", "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1) | int }}{% endif %}"
                        "{% endmacro %}{{ fact(5) }}"),
    ("macro.render_json_schema", "{% macro t(p) %}{% if p.type == 'string' %}str{% elif p.type == 'object' %}"
                                 "{% for k, v in p.properties.items() %}{{ k }}:{{ t(v) }}{% endfor %}{% endif %}"
                                 "{% endmacro %}{{ t(tools[0].function.parameters) }}"),
    ("macro.whitespace", "{% macro m(x) %}\n  <{{ x }}>\n{% endmacro %}[{{ m(1) }}]"),
    ("macro.returns_string", "{% macro m() %}abc{% endmacro %}{{ m() | upper }}{{ m() | length }}"),
    ("call.caller", "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside {{ n }}{% endcall %}"),
    ("call.caller_args", "{% macro each(items) %}{% for i in items %}{{ caller(i, loop.index) }}{% endfor %}"
                         "{% endmacro %}{% call(item, idx) each(xs) %}{{ idx }}:{{ item }} {% endcall %}"),
    # --- filter / raw / comments ---------------------------------------------------------------------
    ("filterblock.upper", "{% filter upper %}abc {{ 'def' }}{% endfilter %}"),
    ("filterblock.chain", "{% filter trim | replace('a', 'o') %}  banana  {% endfilter %}"),
    ("raw.block", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}"),
    ("raw.whitespace", "{% raw -%}   x   {%- endraw %}|"),
    ("comment.inline", "a{# a comment {{ x }} #}b"),
    ("comment.multiline", "a{#\n multi\n line\n#}b"),
    ("comment.trim", "a\n{#- trimmed -#}\nb"),
    # --- raise_exception is only an error when called ---------------------------------------------------
    ("raise.not_called", "{% if no %}{{ raise_exception('never') }}{% endif %}ok"),
    # --- subscripts and slices -----------------------------------------------------------------------
    ("slice.reverse", "{{ xs[::-1] }}{{ 'abc'[::-1] }}"),
    ("slice.from_one", "{{ xs[1:] }}{{ 'hello'[1:] }}"),
    ("slice.to_minus_one", "{{ xs[:-1] }}{{ 'hello'[:-1] }}"),
    ("slice.step", "{{ [0, 1, 2, 3, 4, 5][1:5:2] }}{{ 'abcdef'[::2] }}"),
    ("slice.out_of_range", "{{ xs[5:] }}{{ xs[-10:2] }}"),
    ("index.negative", "{{ xs[-1] }}{{ 'abc'[-2] }}{{ messages[-1].role }}"),
    ("index.out_of_range_undefined", "[{{ xs[10] }}][{{ xs[10] is defined }}]"),
    ("index.attr_vs_item", "{{ d.a }}{{ d['b'] }}{{ nested.a.b.c }}{{ nested['a']['b']['c'] }}"
                           "{{ nested.list[1].k }}"),
    ("index.missing_key", "[{{ d.zz }}][{{ d['zz'] }}][{{ d.zz is defined }}]"),
    ("index.string_item", "{{ 'hello'[0] }}{{ s[2] }}"),
    ("index.dict_var_key", "{% set k = 'b' %}{{ d[k] }}"),
    ("index.unsafe_attr_undefined", "[{{ s.__class__ is defined }}]"),
    # --- string methods --------------------------------------------------------------------------------
    ("str.strip", "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}]"),
    ("str.strip_chars", "[{{ 'xxhixyx'.strip('xy') }}][{{ '--a--'.lstrip('-') }}][{{ '--a--'.rstrip('-') }}]"),
    ("str.strip_newlines", "[{{ '\\n\\t a \\n'.strip() }}][{{ text.strip() }}]"),
    ("str.unicode_whitespace", "[{{ '\\u00a0\\u2003x\\u3000\\x85\\u2028' | trim }}]"
                               "{{ 'a\\u00a0b\\u2003c\\u3000d'.split() }}[{{ '\\u3000y\\u00a0'.strip() }}]"),
    ("str.title_method_vs_filter", "{{ \"it's o'neil\".title() }} {{ \"it's o'neil\" | title }}"),
    ("str.split_sep", "{{ csv.split(',') }}"),
    ("str.split_whitespace", "{{ '  a  b\\tc\\n'.split() }}"),
    ("str.split_maxsplit", "{{ 'a=b=c'.split('=', 1) }}{{ 'a b c'.split(none, 1) }}"),
    ("str.rsplit", "{{ 'a.b.c'.rsplit('.', 1) }}"),
    ("str.split_index", "{{ 'name: value'.split(': ')[1] }}"),
    ("str.startswith", "{{ s.startswith('  He') }}{{ 'abc'.startswith('b') }}{{ 'abc'.startswith(('x', 'a')) }}"),
    ("str.endswith", "{{ 'abc'.endswith('c') }}{{ 'abc'.endswith(('x', 'y')) }}"),
    ("str.case", "{{ 'hello wORLD'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hello wORLD'.title() }} "
                 "{{ 'hello WORLD'.capitalize() }} {{ 'HeLLo'.swapcase() }}"),
    ("str.replace", "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'a.b'.replace('.', '') }}"),
    ("str.find_count", "{{ 'hello'.find('l') }}{{ 'hello'.find('z') }}{{ 'hello'.rfind('l') }}"
                       "{{ 'hello'.count('l') }}{{ 'hello'.index('e') }}"),
    ("str.format", "{{ '{} and {}'.format('a', 1) }} {{ '{0}{1}{0}'.format('x', 'y') }} "
                   "{{ '{name}!'.format(name='Bo') }}"),
    ("str.join", "{{ ', '.join(['a', 'b', 'c']) }}{{ ''.join(words) }}"),
    ("str.splitlines", "{{ text.splitlines() }}"),
    ("str.predicates", "{{ '123'.isdigit() }}{{ '12a'.isdigit() }}{{ 'abc'.isalpha() }}{{ 'ab1'.isalnum() }}"
                       "{{ '  '.isspace() }}{{ 'ABC'.isupper() }}{{ 'abc'.islower() }}{{ ''.isdigit() }}"),
    ("str.pad", "[{{ 'ab'.ljust(5) }}][{{ 'ab'.rjust(5, '*') }}][{{ 'ab'.center(6, '-') }}][{{ '7'.zfill(3) }}]"),
    ("str.partition", "{{ 'k=v=w'.partition('=') }}"),
    ("str.code_points", "{{ uni | length }} {{ uni[1] }} {{ uni[-1] }} {{ uni[3:8] }} {{ uni[::-1] }} "
                        "{{ uni.find('w') }} {{ uni.split(' ') }} {{ uni.upper() | length }}"),
    ("str.multiply", "{{ '-' * 5 }}{{ 3 * 'ab' }}"),
    ("str.percent_format", "{{ '%s is %d years, %.2f%%' % ('Ann', 31, 2.5) }}{{ '%05d|%-4s|%x' % (42, 'a', 255) }}"),
    ("str.percent_single", "{{ 'hi %s' % 'there' }}{{ 'n=%r' % 'q' }}"),
    # --- dict methods ---------------------------------------------------------------------------------
    ("dict.get", "{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 'dflt') }}{{ messages[0].get('name', 'anon') }}"),
    ("dict.keys_values", "{{ d.keys() | list }}{{ d.values() | list }}"),
    ("dict.items_list", "{{ d.items() | list }}"),
    ("dict.in", "{{ 'a' in d }}{{ 'zz' in d }}{{ 'tool_calls' in messages[2] }}{{ 'tool_calls' in messages[1] }}"),
    ("dict.literal_order", "{{ {'z': 1, 'a': 2, 'm': 3} }}"),
    ("dict.length", "{{ d | length }}{{ {} | length }}"),
    # --- tests ---------------------------------------------------------------------------------------
    ("test.defined", "{{ n is defined }}{{ missing is defined }}{{ missing is undefined }}{{ n is not defined }}"),
    ("test.none", "{{ nothing is none }}{{ 0 is none }}{{ missing is none }}{{ nothing is not none }}"),
    ("test.string", "{{ 'a' is string }}{{ 1 is string }}{{ none is string }}{{ messages[0].content is string }}"),
    ("test.number", "{{ 1 is number }}{{ 1.5 is number }}{{ '1' is number }}{{ true is number }}"),
    ("test.integer_float", "{{ 1 is integer }}{{ 1.0 is integer }}{{ 1.0 is float }}{{ 1 is float }}"
                           "{{ true is integer }}"),
    ("test.mapping", "{{ d is mapping }}{{ xs is mapping }}{{ 'x' is mapping }}{{ messages[0] is mapping }}"),
    ("test.iterable", "{{ xs is iterable }}{{ 'x' is iterable }}{{ d is iterable }}{{ 1 is iterable }}"
                      "{{ none is iterable }}"),
    ("test.sequence", "{{ xs is sequence }}{{ 'x' is sequence }}{{ d is sequence }}{{ 1 is sequence }}"),
    ("test.boolean", "{{ true is boolean }}{{ 1 is boolean }}{{ none is boolean }}"),
    ("test.true_false", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}"),
    ("test.odd_even", "{{ 3 is odd }}{{ 3 is even }}{{ 0 is even }}{{ -1 is odd }}"),
    ("test.divisibleby", "{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}"),
    ("test.comparisons", "{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}"
                         "{{ 1 is le 0 }}{{ 'a' is equalto 'a' }}{{ 1 is sameas 1 }}{{ 2 is greaterthan 1 }}"),
    ("test.in", "{{ 1 is in xs }}{{ 'b' is in 'abc' }}{{ 'zz' is in d }}"),
    ("test.lower_upper", "{{ 'abc' is lower }}{{ 'aBc' is lower }}{{ 'ABC' is upper }}"),
    ("test.callable", "{{ raise_exception is callable }}{{ 'x' is callable }}{{ range is callable }}"),
    ("test.sameas", "{{ none is sameas none }}{{ false is sameas false }}{{ 0 is sameas false }}"),
    ("test.not_precedence", "{{ not n is defined }}{{ n is not none and n > 3 }}"),
    ("test.filter_test_exist", "{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}"),
    # --- filters -------------------------------------------------------------------------------------
    ("filter.trim", "[{{ s | trim }}][{{ '\\n x \\t' | trim }}][{{ '--x--' | trim('-') }}]"),
    ("filter.tojson_dict", "{{ d | tojson }}"),
    ("filter.tojson_message", "{{ messages[2] | tojson }}"),
    ("filter.tojson_tools", "{{ tools | tojson }}"),
    ("filter.tojson_indent", "{{ tools[0] | tojson(indent=2) }}"),
    ("filter.tojson_positional_is_ensure_ascii", "{{ uni | tojson(4) }}"),
    ("filter.tojson_sort_keys", "{{ d | tojson(sort_keys=true) }}"),
    ("filter.tojson_separators", "{{ d | tojson(separators=(',', ':')) }}"),
    ("filter.tojson_scalars", "{{ 'a\"b\\\\c\\n\\t\\u0001' | tojson }} {{ none | tojson }} {{ true | tojson }} "
                              "{{ 1.5 | tojson }} {{ 2.0 | tojson }} {{ 10 | tojson }} {{ (1, 2) | tojson }}"),
    ("filter.tojson_unicode", "{{ uni | tojson }} {{ '<b>&\\'</b>' | tojson }}"),
    ("filter.tojson_ensure_ascii", "{{ uni | tojson(ensure_ascii=true) }}"),
    ("filter.tojson_empty", "{{ [] | tojson }}{{ {} | tojson }}{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=2) }}"),
    ("filter.tojson_nested_indent", "{{ nested | tojson(indent=1) }}"),
    ("filter.join", "{{ xs | join }}|{{ xs | join(', ') }}|{{ users | join(', ', attribute='name') }}"),
    ("filter.replace", "{{ 'aXbXc' | replace('X', '-') }}{{ 'aaa' | replace('a', 'b', 2) }}"),
    ("filter.selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}"),
    ("filter.selectattr_eq", "{{ messages | selectattr('role', 'eq', 'tool') | list | length }}"),
    ("filter.selectattr_truthy", "{{ users | selectattr('admin') | map(attribute='name') | join(',') }}"),
    ("filter.selectattr_defined", "{{ users | selectattr('admin', 'defined') | map(attribute='name') | join(',') }}"),
    ("filter.rejectattr", "{{ messages | rejectattr('role', 'in', ['system', 'tool']) | map(attribute='role')"
                          " | join(',') }}"),
    ("filter.select_reject", "{{ [1, 2, 3, 4, 5] | select('odd') | list }}{{ [1, 2, 3, 4, 5] | reject('odd') | list }}"
                             "{{ [0, 1, '', 'a', none] | select | list }}{{ [1, 5, 9] | select('gt', 4) | list }}"),
    ("filter.map_attribute", "{{ users | map(attribute='name') | list }}"),
    ("filter.map_attribute_default", "{{ users | map(attribute='admin', default='?') | list }}"),
    ("filter.map_filter", "{{ ['a', 'b'] | map('upper') | list }}{{ ['1', '2'] | map('int') | sum }}"),
    ("filter.map_nested_attr", "{{ messages | selectattr('tool_calls', 'defined') | map(attribute='tool_calls')"
                               " | first | map(attribute='function.name') | list }}"),
    ("filter.items", "{{ d | items | list }}"),
    ("filter.first_last", "{{ xs | first }}{{ xs | last }}{{ 'abc' | first }}{{ 'abc' | last }}"
                          "{{ messages | first | attr('role') }}"),
    ("filter.first_empty", "[{{ ys | first }}][{{ (ys | first) is defined }}]"),
    ("filter.length_count", "{{ xs | length }}{{ 'hello' | count }}{{ d | length }}{{ missing | length }}"),
    ("filter.default", "[{{ missing | default('dflt') }}][{{ empty | default('dflt') }}]"
                       "[{{ empty | default('dflt', true) }}][{{ nothing | default('dflt') }}]"
                       "[{{ nothing | d('dflt', true) }}][{{ n | d(0) }}]"),
    ("filter.default_chain", "{{ d.zz | default(d.a) }}{{ missing | default(missing2) | default('x') }}"),
    ("filter.case", "{{ 'hello wORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'hello wORLD' | title }} "
                    "{{ 'hello WORLD' | capitalize }} {{ \"it's o'neil\" | title }}"),
    ("filter.list", "{{ 'abc' | list }}{{ d | list }}{{ range(3) | list }}"),
    ("filter.string", "{{ 12 | string }}{{ xs | string }}{{ none | string }}{{ (xs | string) | length }}"),
    ("filter.int", "{{ '42' | int }} {{ '3.7' | int }} {{ 'abc' | int }} {{ 'abc' | int(-1) }} {{ 3.99 | int }}"
                   " {{ -3.99 | int }} {{ '0x1A' | int(0, 16) }} {{ true | int }}"),
    ("filter.float", "{{ '1.5' | float }} {{ 'x' | float }} {{ 3 | float }} {{ '1e3' | float }}"),
    ("filter.abs", "{{ neg | abs }}{{ -2.5 | abs }}"),
    ("filter.round", "{{ 2.5 | round }} {{ 3.5 | round }} {{ 3.14159 | round(2) }} {{ 2.4 | round(0, 'ceil') }}"
                     " {{ 2.6 | round(method='floor') }} {{ 7 | round }} {{ 1234.5678 | round(-2) }}"),
    ("filter.sum_min_max", "{{ xs | sum }} {{ xs | sum(start=10) }} {{ xs | min }} {{ xs | max }} "
                           "{{ users | sum(attribute='age') }} {{ words | min }} {{ words | max }}"),
    ("filter.min_max_attr", "{{ (users | max(attribute='age')).name }}{{ (users | min(attribute='age')).name }}"),
    ("filter.sort", "{{ xs | sort }}{{ xs | sort(reverse=true) }}{{ words | sort }}"
                    "{{ words | sort(case_sensitive=true) }}"),
    ("filter.sort_attribute", "{{ users | sort(attribute='age') | map(attribute='name') | join(',') }}"
                              "{{ users | sort(attribute='name') | map(attribute='name') | join(',') }}"),
    ("filter.unique", "{{ [1, 2, 1, 3, 2] | unique | list }}{{ words | unique | list }}"),
    ("filter.reverse", "{{ xs | reverse | list }}{{ 'abc' | reverse }}"),
    ("filter.dictsort", "{{ d | dictsort }}{{ d | dictsort(reverse=true) }}{{ d | dictsort(by='value') }}"),
    ("filter.batch", "{{ [1, 2, 3, 4, 5] | batch(2) | list }}{{ [1, 2, 3] | batch(2, 'x') | list }}"),
    ("filter.slice", "{{ [1, 2, 3, 4, 5] | slice(2) | list }}"),
    ("filter.indent", "[{{ 'a\\nb\\n\\nc' | indent }}][{{ 'a\\nb' | indent(2, true) }}]"
                      "[{{ 'a\\n\\nb' | indent(2, blank=true) }}][{{ 'x\\ny' | indent('> ') }}]"),
    ("filter.center", "[{{ 'ab' | center(7) }}]"),
    ("filter.wordcount", "{{ 'one two  three\\nfour' | wordcount }}"),
    ("filter.truncate", "[{{ 'The quick brown fox jumps' | truncate(15) }}][{{ 'short' | truncate(10) }}]"
                        "[{{ 'The quick brown fox jumps' | truncate(10, true) }}]"
                        "[{{ ('abcdefghij' * 3) | truncate(20, end='~') }}]"),
    ("filter.format", "{{ '%s-%s' | format('a', 'b') }}{{ '%(x)s!' | format(x=1) }}"),
    ("filter.safe_escape", "{{ '<b>&</b>' | safe }} {{ '<b>&\"\\'</b>' | e }} {{ '<x>' | escape }}"),
    ("filter.striptags", "{{ '<p>a  <b>b</b>\\n c</p>' | striptags }}"),
    ("filter.attr", "{{ messages[0] | attr('role') }}[{{ d | attr('a') }}]"),
    ("filter.chained", "{{ '  A,b , C ' | trim | lower | replace(' ', '') | title }}"),
    ("filter.filter_args_exprs", "{{ xs | join(', ' ~ '|') }}"),
    ("filter.unknown_in_untaken_if", "{% if no %}{{ xs | from_json }}{% endif %}ok"),
    ("filter.unknown_test_in_untaken_if", "{% if no %}{{ xs is nosuchtest }}{% endif %}ok"),
    ("filter.unknown_in_untaken_ternary", "{{ xs | nosuchfilter if no else 'ok' }}"),
    ("filter.tojson_of_lists_made_by_filters", "{{ d | dictsort | tojson }}{{ xs | sort | tojson }}"
                                              "{{ 'ab' | list | tojson }}{{ {'t': (1, 2)} | tojson }}"),
    ("filter.tojson_indent_zero_tab", "{{ xs | tojson(indent=0) }}{{ xs | tojson(indent='\t') }}"),
    ("filter.tojson_floats", "{{ 1.0 | tojson }} {{ 1e20 | tojson }} {{ (0.1 + 0.2) | tojson }} {{ -0.0 | tojson }}"),
    ("filter.map_missing_attribute", "{{ users | map(attribute='email') | list }}"
                                     "[{{ users | map(attribute='email') | join(',') }}]"),
    ("filter.map_upper_on_ints", "{{ xs | map('upper') | list }}"),
    ("filter.generator_first_sort_sum", "{{ xs | select | first }}{{ xs | select | sort }}{{ xs | select | sum }}"),
    ("filter.generator_index_is_undefined", "[{{ (xs | map('string'))[0] }}][{{ (xs | select)[0] is defined }}]"),
    # --- operators -----------------------------------------------------------------------------------
    ("op.arith_int", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}"),
    ("op.arith_negative", "{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ -7 / 2 }} {{ 2 ** -1 }}"),
    ("op.arith_float", "{{ 1 + 1.5 }} {{ 4 / 2 }} {{ 0.1 + 0.2 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 1.5 * 2 }}"),
    ("op.bool_arith", "{{ true + 1 }} {{ false * 3 }} {{ true + true }}"),
    ("op.pow_left_assoc", "{{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ (-2) ** 2 }}"),
    ("op.concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] }}|{{ 'a' ~ 2 * 3 }}"),
    ("op.concat_undefined", "[{{ missing ~ 'x' }}]"),
    ("op.string_plus", "{{ 'a' + 'b' }}{{ [1] + [2, 3] }}"),
    ("op.in", "{{ 'ell' in 'hello' }}{{ 2 in xs }}{{ 5 not in xs }}{{ 'a' not in d }}{{ 'x' in [] }}"),
    ("op.compare", "{{ 1 < 2 }}{{ 2 <= 2 }}{{ 'a' < 'b' }}{{ 'B' < 'a' }}{{ [1, 2] < [1, 3] }}{{ 1 == 1.0 }}"
                   "{{ 1 != '1' }}{{ none == none }}{{ missing == none }}"),
    ("op.compare_chain", "{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 1 == 1 == 1 }}"),
    ("op.and_or_operands", "[{{ 0 or 'x' }}][{{ 'a' and 'b' }}][{{ '' and 'b' }}][{{ none or [] }}]"
                           "[{{ 0 or none }}][{{ [] or {} }}][{{ 1 and 0 }}]"),
    ("op.not", "{{ not true }}{{ not 0 }}{{ not '' }}{{ not [1] }}{{ not missing }}"),
    ("op.not_eq_precedence", "{{ not 1 == 2 }}{{ not n == 7 }}"),
    ("op.neg_filter_precedence", "{{ -neg | abs }} {{ (-neg) | abs }} {{ - 3 | abs }}"),
    ("op.concat_filter_precedence", "{{ 'a' ~ 'b' | upper }}"),
    ("op.math_precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ 2 * 3 % 4 }} {{ 100 / 10 / 5 }}"),
    ("op.and_or_precedence", "{{ true or false and false }}{{ (true or false) and false }}"),
    ("op.ternary_nested", "{{ 'a' if n > 10 else 'b' if n > 5 else 'c' }}"),
    ("op.ternary_filter", "{{ (xs if yes else ys) | length }}{{ 'x' if yes else 'y' | upper }}"),
    ("op.in_precedence", "{{ not 'a' in d }}{{ 1 + 1 in xs }}"),
    ("op.list_compare_eq", "{{ xs == [3, 1, 2] }}{{ d == {'b': 2, 'a': 1, 'C': 3} }}{{ (1, 2) == [1, 2] }}"),
    # --- literals -------------------------------------------------------------------------------------
    ("lit.int", "{{ 42 }} {{ -7 }} {{ 1_000_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 0 }} {{ 00 }}"),
    ("lit.float", "{{ 1.5 }} {{ 1e3 }} {{ 2.5e-3 }} {{ 1_0.5 }} {{ 0.5 }} {{ 1E2 }} {{ 1.5e+2 }}"),
    ("lit.string_escapes", "[{{ 'a\\nb' }}][{{ 'tab\\there' }}][{{ 'it\\'s' }}][{{ \"q\\\"q\" }}][{{ '\\u00e9' }}]"
                           "[{{ '\\x41' }}][{{ '\\\\' }}][{{ 'a\\\\nb' }}]"),
    ("lit.string_adjacent", "{{ 'a' 'b' \"c\" }}"),
    ("lit.string_raw_newline", "{{ 'line1\nline2' }}"),
    ("lit.list_tuple_dict", "{{ [1, 'two', 3.0] }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ {'k': 'v', 'n': 1} }} {{ [] }}"),
    ("lit.trailing_comma", "{{ [1, 2,] }}{{ {'a': 1,} }}"),
    ("lit.booleans_none", "{{ true }} {{ True }} {{ false }} {{ False }} {{ none }} {{ None }}"),
    ("lit.uppercase_true_is_a_name", "[{{ TRUE }}][{{ TRUE is defined }}]"),
    # --- str() of values when printed -----------------------------------------------------------------
    ("print.mixed_list", "{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }}"),
    ("print.floats", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 3.0 }} {{ -0.0 }} {{ 1e15 }} {{ 123456789.123 }}"
                     " {{ 1 / 3 }} {{ 2 / 3 * 3 }} {{ 1e22 }} {{ 0.0001 }}"),
    ("print.string_repr_in_list", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', 'a\\nb', 'tab\\t', '\u00e9', '\\\\'] }}"),
    ("print.dict_repr", "{{ d }} {{ messages[2].tool_calls[0].function.arguments }}"),
    ("print.message", "{{ messages[3] }}"),
    ("print.nested_repr", "{{ nested }}"),
    ("print.none_true_false", "{{ nothing }}{{ yes }}{{ no }}"),
    ("print.undefined_empty", "[{{ missing }}][{{ d.zz }}][{{ messages[0].nope }}]"),
    ("print.context_strings", "{{ s }}|{{ text }}|{{ uni }}"),
    ("print.tool_call_args_string_concat", "{{ 'args: ' ~ messages[2].tool_calls[0].function.arguments }}"),
    ("print.int_big", "{{ 2 ** 40 }} {{ 10 ** 15 }} {{ -2 ** 62 }}"),
    # --- undefined behaviour ----------------------------------------------------------------------------
    ("undef.missing_key_print", "[{{ messages[1].tool_calls }}]"),
    ("undef.is_defined", "{{ missing is defined }}{{ messages[1].tool_calls is defined }}"
                         "{{ messages[2].tool_calls is defined }}"),
    ("undef.default", "{{ missing | default('x') }}{{ messages[1].name | default('anon') }}"),
    ("undef.length", "{{ missing | length }}"),
    ("undef.iterate", "[{% for x in missing %}x{% endfor %}]"),
    ("undef.concat", "[{{ missing ~ 'x' }}]"),
    ("undef.compare", "{{ missing == none }}{{ missing != 'a' }}{{ not missing }}"),
    ("undef.in_if_and", "{% if missing and missing.attr %}Y{% else %}N{% endif %}"),
    ("undef.string_filter", "[{{ missing | string }}][{{ missing | upper }}][{{ missing | trim }}]"),
    ("undef.list_filter", "{{ missing | list }}"),
    ("undef.join", "[{{ missing | join(',') }}]"),
    ("undef.namespace_missing", "{% set ns = namespace() %}[{{ ns.nope }}]"),
    # --- whitespace control -----------------------------------------------------------------------------
    ("ws.trim_blocks", "{% if yes %}\nA\n{% endif %}\nB"),
    ("ws.trim_blocks_for", "{% for x in xs %}\n{{ x }}\n{% endfor %}\n"),
    ("ws.trim_after_set", "{% set a = 1 %}\n{{ a }}"),
    ("ws.no_trim_after_expression", "{{ 'a' }}\n{{ 'b' }}\n"),
    ("ws.trim_after_comment", "{# c #}\nx"),
    ("ws.lstrip_spaces", "  {% if yes %}\n    X\n  {% endif %}\nY"),
    ("ws.lstrip_tabs", "\t\t{% if yes %}\n\tX\n\t{% endif %}\n"),
    ("ws.lstrip_mixed", " \t {% if yes %}Z{% endif %}"),
    ("ws.lstrip_not_after_text", "a  {% if yes %}Z{% endif %}"),
    ("ws.lstrip_comment", "a\n   {# c #}\nb"),
    ("ws.no_lstrip_for_expression", "  {{ 'x' }}"),
    ("ws.minus_left", "a   \n  {%- if yes %}B{% endif %}"),
    ("ws.minus_right", "{% if yes -%}   \n  B{% endif %}"),
    ("ws.minus_expression", "a  {{- 'b' -}}  c  {{- ' d ' }}  e"),
    ("ws.minus_both_loop", "<\n{%- for x in xs -%}\n  {{ x }}\n{%- endfor -%}\n>"),
    ("ws.plus_left", "  {%+ if yes %}A{% endif %}"),
    ("ws.plus_right", "{% if yes +%}\nA{% endif %}"),
    ("ws.minus_comment", "a  {#- c -#}  b"),
    ("ws.trailing_newline_dropped", "abc\n"),
    ("ws.trailing_newlines_two", "abc\n\n"),
    ("ws.crlf_source", "a\r\nb{% if yes %}\r\nc{% endif %}\r\nd\r\n"),
    ("ws.crlf_in_string_literal", "{{ 'x\r\ny' }}|"),
    ("ws.cr_only", "a\rb{% if yes %}\rc{% endif %}\r"),
    ("ws.only_newline_after_block", "{% if yes %}  \nA{% endif %}"),
    ("ws.endraw_trim", "{% raw %}\nR\n{% endraw %}\nX"),
    ("ws.block_alone_on_lines", "A\n  {% for x in xs %}\n  - {{ x }}\n  {% endfor %}\nB"),
    ("ws.minus_set", "X\n{%- set a = 1 -%}\n  Y"),
    ("ws.generation_block", "A\n{% generation %}\nG {{ n }}\n{% endgeneration %}\nB"),
    # --- strftime_now / generation ---------------------------------------------------------------------
    ("strftime.date", "{{ strftime_now('%d %b %Y') }}"),
    ("strftime.iso", "{{ strftime_now('%Y-%m-%dT%H:%M:%S') }} {{ strftime_now('%A %B %j %y') }}"),
    ("strftime.percent", "{{ strftime_now('%%|%H') }}"),
    ("generation.pass_through", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                                "{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}"),
    ("generation.set_inside_is_local", "{% generation %}{% set q = 1 %}G{% endgeneration %}[{{ q }}]"),
    # --- sandbox: attributes that exist but are not callable/mutating are fine ----------------------------
    ("sandbox.string_methods_ok", "{{ 'a-b'.split('-') | join('+') }}"),
    # --- realistic chat fragments ---------------------------------------------------------------------
    ("chat.chatml", "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + (m.content if m.content is string"
                    " else '') + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                    "{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    ("chat.system_split", "{% if messages[0].role == 'system' %}{% set sys = messages[0].content %}"
                          "{% set rest = messages[1:] %}{% else %}{% set sys = '' %}{% set rest = messages %}"
                          "{% endif %}"
                          "[{{ sys }}]{{ rest | length }}"),
    ("chat.tool_calls_json", "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}"
                             "{{ {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}"
                             "{% endfor %}{% endif %}{% endfor %}"),
    ("chat.tools_json_lines", "{% for t in tools %}\n{{ t | tojson }}\n{% endfor %}"),
    ("chat.last_user_index", "{% set ns = namespace(i=-1) %}{% for m in messages %}{% if m.role == 'user' %}"
                             "{% set ns.i = loop.index0 %}{% endif %}{% endfor %}{{ ns.i }}"),
    ("chat.content_trim_concat", "{{ bos_token }}{% for m in messages %}{{ m.role | upper }}: "
                                 "{{ m.content | trim }}{{ eos_token if m.role == 'assistant' }}\n{% endfor %}"),
]

# Templates that raise in jinja2; the C++ engine must report an error too.
ERROR_CONSTRUCTS = [
    ("err.raise_exception", "{{ raise_exception('Conversation roles must alternate user/assistant') }}"),
    ("err.raise_in_loop", "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}"
                          "{% endif %}{{ m.role }}{% endfor %}"),
    ("err.undefined_plus", "{{ missing + 1 }}"),
    ("err.undefined_attr", "{{ missing.attr }}"),
    ("err.undefined_item", "{{ missing['k'] }}"),
    ("err.undefined_call", "{{ missing() }}"),
    ("err.undefined_attr_in_defined_test", "{{ missing.attr is defined }}"),
    ("err.filter_binds_before_multiply", "{{ 'ab' * 3 | truncate(4) }}"),
    ("err.undefined_method_on_missing_key", "{{ messages[1].tool_calls.append }}"),
    ("err.undefined_tojson", "{{ missing | tojson }}"),
    ("err.undefined_iterate_attr", "{% for x in missing.items %}{% endfor %}"),
    ("err.syntax_if_empty", "{% if %}x{% endif %}"),
    ("err.syntax_unclosed_if", "{% if yes %}x"),
    ("err.syntax_unclosed_for", "{% for x in xs %}x"),
    ("err.syntax_unclosed_expression", "{{ 1 + }}"),
    ("err.syntax_unclosed_tag", "{{ 'a' "),
    ("err.syntax_unknown_tag", "{% frobnicate %}"),
    ("err.syntax_endfor_mismatch", "{% if yes %}x{% endfor %}"),
    ("err.syntax_stray_endif", "x{% endif %}"),
    ("err.syntax_bad_string", "{{ 'unterminated }}"),
    ("err.syntax_break_outside_loop", "{% break %}"),
    ("err.int_div_zero", "{{ 1 // 0 }}"),
    ("err.div_zero", "{{ 1 / 0 }}"),
    ("err.mod_zero", "{{ 7 % 0 }}"),
    ("err.str_plus_int", "{{ 'a' + 1 }}"),
    ("err.concat_then_plus", "{{ 'a' ~ 1 + 2 }}"),
    ("err.int_plus_none", "{{ 1 + none }}"),
    ("err.none_attr_call", "{{ none.strip() }}"),
    ("err.call_non_callable", "{{ n() }}"),
    ("err.sandbox_list_append", "{% set _ = xs.append(4) %}"),
    ("err.sandbox_dict_update", "{% set _ = d.update({'z': 1}) %}"),
    ("err.sandbox_list_pop", "{{ xs.pop() }}"),
    ("err.set_attr_on_dict", "{% set d.a = 5 %}"),
    ("err.unknown_filter", "{{ xs | nosuchfilter }}"),
    ("err.unknown_test", "{{ xs is nosuchtest }}"),
    ("err.unknown_filter_in_taken_if", "{% if yes %}{{ xs | from_json }}{% endif %}"),
    ("err.unknown_filter_in_for_body", "{% for x in ys %}{{ x | nosuchfilter }}{% endfor %}ok"),
    ("err.unknown_filter_in_macro", "{% macro m() %}{{ 1 | nosuchfilter }}{% endmacro %}ok"),
    ("err.generator_length", "{{ xs | select('odd') | length }}"),
    ("err.generator_tojson", "{{ tools | map(attribute='function') | tojson }}"),
    ("err.generator_last", "{{ xs | select | last }}"),
    ("err.reverse_tojson", "{{ xs | reverse | tojson }}"),
    ("err.unique_tojson", "{{ xs | unique | tojson }}"),
    ("err.dict_items_tojson", "{{ d.items() | tojson }}"),
    ("err.range_tojson", "{{ range(3) | tojson }}"),
    ("err.include_no_loader", "{% include 'other.jinja' %}"),
    ("err.macro_too_many_args", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}"),
    ("err.macro_unknown_kwarg", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(a=1, b=2) }}"),
    ("err.compare_str_int", "{{ 'a' < 1 }}"),
    ("err.sort_mixed_types", "{{ [1, 'a'] | sort }}"),
    ("err.unpack_mismatch", "{% set a, b = [1, 2, 3] %}"),
    ("err.tojson_unsupported_arg", "{{ xs | tojson(bogus=1) }}"),
    ("err.dict_key_index_on_list", "{{ xs['a'].b }}"),
    ("err.format_missing_arg", "{{ '{} {}'.format(1) }}"),
    ("err.percent_too_few", "{{ '%s %s' % ('a',) }}"),
]
