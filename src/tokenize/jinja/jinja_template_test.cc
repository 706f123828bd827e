#include "tokenize/jinja/jinja_template.h"

#include <gtest/gtest.h>

#include "tokenize/jinja/jinja_json.h"

namespace kvroute::tokenize::jinja {
namespace {

// Renders `source` with variables given as JSON text; returns the text or "ERROR: ...".
std::string Render(std::string_view source, std::string_view vars_json = "{}") {
  auto t = Template::Parse(source);
  if (!t) return "PARSE ERROR: " + t.error();
  auto vars = ParseJson(vars_json);
  if (!vars) return "JSON ERROR: " + vars.error();
  auto out = t->Render(*vars);
  return out ? *out : "ERROR: " + out.error();
}

bool ParseFails(std::string_view source) { return !Template::Parse(source).has_value(); }

TEST(JinjaTest, TextAndExpressionOutput) { EXPECT_EQ(Render("a{{ x }}b", R"({"x": "X"})"), "aXb"); }

TEST(JinjaTest, PrintsPythonStyleScalars) {
  EXPECT_EQ(Render("{{ none }} {{ true }} {{ 3 }} {{ 2.5 }} {{ undefined_name }}|"),
            "None True 3 2.5 |");
}

TEST(JinjaTest, IfElifElse) {
  const char* t = "{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(Render(t, R"({"n": 1})"), "one");
  EXPECT_EQ(Render(t, R"({"n": 2})"), "two");
  EXPECT_EQ(Render(t, R"({"n": 5})"), "many");
}

TEST(JinjaTest, ForLoopVariables) {
  EXPECT_EQ(Render("{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ x }}"
                   "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %};{% endfor %}",
                   R"({"xs": ["a", "b"]})"),
            "01aF;12bL;");
}

TEST(JinjaTest, ForLoopFilterAndElse) {
  EXPECT_EQ(Render("{% for x in xs if x > 1 %}{{ x }}{% endfor %}", R"({"xs": [1, 2, 3]})"), "23");
  EXPECT_EQ(Render("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", R"({"xs": []})"),
            "empty");
}

TEST(JinjaTest, ForLoopUnpacksPairs) {
  EXPECT_EQ(Render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}",
                   R"({"d": {"b": 1, "a": 2}})"),
            "b=1,a=2,");
}

TEST(JinjaTest, BreakAndContinue) {
  EXPECT_EQ(Render("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                   R"({"xs": [1, 2, 3, 4, 5]})"),
            "13");
}

TEST(JinjaTest, SetInsideLoopDoesNotLeak) {
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = 5 %}{% endfor %}{{ x }}"), "1");
}

TEST(JinjaTest, NamespaceCarriesStateOutOfLoops) {
  EXPECT_EQ(Render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}"
                   "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
            "6");
}

TEST(JinjaTest, SetBlockCapturesOutput) {
  EXPECT_EQ(Render("{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]"), "[a2b]");
}

TEST(JinjaTest, MacroWithDefaults) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c') }}"),
            "hi a! hi b? hi c!");
}

TEST(JinjaTest, WhitespaceControlStripsAdjacentWhitespace) {
  EXPECT_EQ(Render("a  \n {{- 'b' -}} \n  c"), "abc");
  EXPECT_EQ(Render("a {%- if true -%} b {%- endif -%} c"), "abc");
}

TEST(JinjaTest, TrimAndLstripBlocks) {
  // A block tag's own line contributes nothing (trim_blocks + lstrip_blocks).
  EXPECT_EQ(Render("x\n  {% if true %}\ny\n  {% endif %}\nz"), "x\ny\nz");
}

TEST(JinjaTest, DropsOneTrailingNewlineOfTheTemplate) { EXPECT_EQ(Render("a\n\n"), "a\n"); }

TEST(JinjaTest, CommentsAreRemoved) { EXPECT_EQ(Render("a{# note #}b"), "ab"); }

TEST(JinjaTest, ArithmeticAndComparison) {
  EXPECT_EQ(
      Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 + 2 * 3 }} {{ 3 > 2 }} {{ 'a' < 'b' }}"),
      "3 -4 1 7 True True");
}

TEST(JinjaTest, LoopObjectKeptByTheBodyKeepsItsIteration) {
  // The interpreter reuses the loop dict between iterations; one the body stored must not
  // change afterwards.
  EXPECT_EQ(Render("{% set ns = namespace(kept=none) %}{% for x in xs %}"
                   "{% if loop.first %}{% set ns.kept = loop %}{% endif %}{% endfor %}"
                   "{{ ns.kept.index }}{{ ns.kept.first }}{{ ns.kept.nextitem }}",
                   R"({"xs": ["a", "b", "c"]})"),
            "1Trueb");
}

TEST(JinjaTest, LoopElseSeesTheOuterLoop) {
  EXPECT_EQ(Render("{% for x in xs %}{% for y in [] %}{% else %}{{ loop.index }}{% endfor %}"
                   "{% endfor %}",
                   R"({"xs": ["a", "b"]})"),
            "12");
}

TEST(JinjaTest, StringConcatenationChains) {
  EXPECT_EQ(Render("{{ 'a' + x + 'b' + (y | trim) + 'c' }}", R"({"x": "X", "y": "  long text  "})"),
            "aXblong textc");
}

TEST(JinjaTest, BooleanOperatorsReturnOperands) {
  EXPECT_EQ(Render("{{ '' or 'x' }} {{ 'a' and 'b' }} {{ not none }}"), "x b True");
}

TEST(JinjaTest, MembershipTests) {
  EXPECT_EQ(Render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }}",
                   R"({"d": {"k": 1}})"),
            "True True True True");
}

TEST(JinjaTest, IsTests) {
  EXPECT_EQ(Render("{{ x is defined }} {{ y is defined }} {{ n is none }} {{ s is string }} "
                   "{{ f is false }} {{ x is not none }} {{ d is mapping }}",
                   R"({"x": 1, "n": null, "s": "s", "f": false, "d": {}})"),
            "True False True True True True True");
}

TEST(JinjaTest, SlicingAndNegativeIndices) {
  EXPECT_EQ(Render("{{ xs[::-1] }} {{ xs[-1] }} {{ xs[1:] }} {{ s[1:3] }} {{ s[-1] }}",
                   R"({"xs": [1, 2, 3], "s": "héllo"})"),
            "[3, 2, 1] 3 [2, 3] él o");
}

TEST(JinjaTest, StringMethodsFollowPython) {
  EXPECT_EQ(Render("[{{ s.strip('\\n') }}][{{ s.lstrip() }}][{{ s.split('b')[-1] }}]"
                   "[{{ s.startswith('\\n a') }}][{{ 'a b  c'.split() }}]",
                   R"({"s": "\n abc \n"})"),
            "[ abc ][abc \n][c \n][True][['a', 'b', 'c']]");
}

// Expected values below are what Python's str/dict methods (and jinja2 3.1's replace
// filter) give for the same calls.
TEST(JinjaTest, ReplaceWithACountReplacesOnlyTheFirstOccurrences) {
  EXPECT_EQ(Render("{{ 'a-b-c-d' | replace('-', '+', 2) }}|{{ 'a-b' | replace('-', '+', 0) }}|"
                   "{{ 'a-b-c'.replace('-', '', 1) }}|{{ 'a-b' | replace('-', '+', count=-1) }}"),
            "a+b+c-d|a-b|ab-c|a+b");
}

TEST(JinjaTest, SplitWithMaxsplitKeepsTheRestWhole) {
  EXPECT_EQ(Render("{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.split(',', maxsplit=1) }}|"
                   "{{ 'a b'.split(' ', 0) }}|{{ 'a b c'.split(' ', -1) }}|"
                   "{{ '  a  b c'.split(none, 1) }}|{{ '  a  b c '.split(none, 1) }}|"
                   "{{ 'a   '.split(none, 1) }}"),
            "['a', 'b c']|['a', 'b,c']|['a b']|['a', 'b', 'c']|['a', 'b c']|['a', 'b c ']|['a']");
}

TEST(JinjaTest, FindCountsCodePointsAndGivesMinusOneWhenAbsent) {
  EXPECT_EQ(Render("{{ 'héllo'.find('l') }}|{{ 'abc'.find('z') }}|{{ 'abc'.find('') }}"), "2|-1|0");
}

TEST(JinjaTest, FindWithANonStringArgumentFails) {
  EXPECT_TRUE(Render("{{ 'a'.find(1) }}").starts_with("ERROR"));  // Python: TypeError
}

TEST(JinjaTest, DictGetGivesTheValueTheDefaultOrNone) {
  EXPECT_EQ(Render("{{ d.get('k', 'x') }}|{{ d.get('k') }}|{{ d.get('a') }}", R"({"d": {"a": 1}})"),
            "x|None|1");
}

TEST(JinjaTest, DictGetWithANonStringKeyGivesTheDefault) {  // Python: {'a': 1}.get(1) is None
  EXPECT_EQ(Render("{{ d.get(1) }}|{{ d.get(1, 'x') }}", R"({"d": {"a": 1}})"), "None|x");
}

TEST(JinjaTest, Filters) {
  EXPECT_EQ(Render("{{ xs | length }} {{ ' a ' | trim }} {{ xs | join('-') }} {{ xs | first }} "
                   "{{ u | default('d') }} {{ 'ab' | upper }} {{ xs | reverse | list }}",
                   R"({"xs": [1, 2, 3]})"),
            "3 a 1-2-3 1 d AB [3, 2, 1]");
}

TEST(JinjaTest, ToJsonKeepsKeyOrderAndUnicode) {
  EXPECT_EQ(Render("{{ v | tojson }}", R"({"v": {"b": [1, 2.5, null, true], "a": "é\n\"q\""}})"),
            R"({"b": [1, 2.5, null, true], "a": "é\n\"q\""})");
}

TEST(JinjaTest, ToJsonWithIndent) {
  EXPECT_EQ(Render("{{ v | tojson(indent=2) }}", R"({"v": {"a": [1]}})"),
            "{\n  \"a\": [\n    1\n  ]\n}");
}

TEST(JinjaTest, SelectAttrAndMap) {
  EXPECT_EQ(Render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }}",
                   R"({"ms": [{"role": "user", "c": 1}, {"role": "x", "c": 2}]})"),
            "[1]");
}

TEST(JinjaTest, SelectAndRejectWithTests) {
  EXPECT_EQ(Render("{{ xs | reject('equalto', 'b') | join(', ') }}|{{ [0, 1, 2] | select | list }}",
                   R"({"xs": ["a", "b", "c"]})"),
            "a, c|[1, 2]");
}

TEST(JinjaTest, DictAndListLiterals) {
  EXPECT_EQ(Render("{{ {'a': [1, (2, 3)]}['a'][1][0] }}"), "2");
}

TEST(JinjaTest, ConditionalExpression) {
  EXPECT_EQ(Render("{{ 'y' if x else 'n' }}{{ 'z' if not x }}", R"({"x": false})"), "nz");
}

TEST(JinjaTest, RaiseExceptionIsARenderError) {
  EXPECT_EQ(Render("{{ raise_exception('bad role') }}"), "ERROR: chat template raised: bad role");
}

TEST(JinjaTest, TypeErrorsAreRenderErrors) {
  EXPECT_TRUE(Render("{{ 'a' + 1 }}").starts_with("ERROR"));
  EXPECT_TRUE(Render("{{ u.x }}").starts_with("ERROR"));
}

TEST(JinjaTest, UnsupportedConstructsFailAtParse) {
  EXPECT_TRUE(ParseFails("{{ x | no_such_filter }}"));
  EXPECT_TRUE(ParseFails("{{ x is no_such_test }}"));
  EXPECT_TRUE(ParseFails("{% include 'other.j2' %}"));
  EXPECT_TRUE(ParseFails("{{ strftime_now('%Y') }}"));
  EXPECT_TRUE(ParseFails("{{ x.no_such_method() }}"));
  EXPECT_TRUE(ParseFails("{% if x %}unterminated"));
  EXPECT_TRUE(ParseFails("{{ 'unterminated }}"));
}

}  // namespace
}  // namespace kvroute::tokenize::jinja
