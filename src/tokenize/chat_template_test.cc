#include "tokenize/chat_template.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

std::unique_ptr<ChatTemplate> Make(std::string_view source) {
  auto t = ChatTemplate::Create(source, {.bos = "<s>", .eos = "</s>"});
  EXPECT_TRUE(t.has_value()) << t.error();
  return t ? std::move(*t) : nullptr;
}

TEST(ChatTemplateTest, ExposesMessagesAndSpecialTokens) {
  auto t = Make(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m['content'] }}]{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}{{ eos_token }}");
  ChatRequest req;
  req.messages = {{.role = "user", .content = "hi"}, {.role = "assistant", .content = "yo"}};
  req.add_generation_prompt = true;
  EXPECT_EQ(t->Render(req).value(), "<s>[user:hi][assistant:yo]></s>");
}

TEST(ChatTemplateTest, ToolCallArgumentsArriveParsedAsObjects) {
  auto t = Make(
      "{% for c in messages[0].tool_calls %}{{ c.type }} {{ c.function.name }} "
      "{{ c.function.arguments | tojson }} {{ c.function.arguments.a }}{% endfor %}");
  ChatRequest req;
  ChatMessage m{.role = "assistant"};
  m.tool_calls = {{.id = "1", .name = "f", .arguments_json = R"({"a": 1.5, "b": "x"})"}};
  req.messages = {m};
  EXPECT_EQ(t->Render(req).value(), R"(function f {"a": 1.5, "b": "x"} 1.5)");
}

TEST(ChatTemplateTest, InvalidArgumentsStayAString) {
  auto t = Make("{{ messages[0].tool_calls[0].function.arguments is string }}");
  ChatRequest req;
  ChatMessage m{.role = "assistant"};
  m.tool_calls = {{.id = "1", .name = "f", .arguments_json = "not json"}};
  req.messages = {m};
  EXPECT_EQ(t->Render(req).value(), "True");
}

TEST(ChatTemplateTest, ToolsAreUndefinedWithoutTools) {
  auto t = Make("{% if tools is defined %}{{ tools | length }}{% else %}none{% endif %}");
  ChatRequest req;
  EXPECT_EQ(t->Render(req).value(), "none");
  req.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
  EXPECT_EQ(t->Render(req).value(), "1");
}

TEST(ChatTemplateTest, ContinueFinalMessageCutsAfterTheLastContent) {
  auto t = Make(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  ChatRequest req;
  req.messages = {{.role = "user", .content = "q"}, {.role = "assistant", .content = "partial "}};
  req.continue_final_message = true;
  EXPECT_EQ(t->Render(req).value(), "<user>q</user><assistant>partial");
}

TEST(ChatTemplateTest, UnsupportedTemplateFailsAtCreate) {
  EXPECT_FALSE(ChatTemplate::Create("{% include 'x' %}", {}).has_value());
}

}  // namespace
}  // namespace kvroute::tokenize
