#include "json_patch.h"

#include "gtest/gtest.h"

namespace missile::webhook {
namespace {

TEST(JsonPointerTest, EscapesTildeBeforeSlash) {
  EXPECT_EQ(EscapePointerToken("plain"), "plain");
  EXPECT_EQ(EscapePointerToken("missile.io/class"), "missile.io~1class");
  EXPECT_EQ(EscapePointerToken("a~1/b"), "a~01~1b");
  EXPECT_EQ(EscapePointerToken(""), "");
}

TEST(JsonPointerTest, BuildsTokenByToken) {
  JsonPointer root;
  EXPECT_EQ(root.str(), "");
  EXPECT_EQ(root.Key("spec").Key("containers").Index(2).Key("env").End().str(),
            "/spec/containers/2/env/-");
  EXPECT_EQ(root.Key("metadata").Key("annotations").Key("missile.io/tenant").str(),
            "/metadata/annotations/missile.io~1tenant");
}

TEST(JsonPointerTest, EscapedPathReachesTheMemberWhenApplied) {
  Json doc = {{"metadata", {{"annotations", {{"a/b~c", "old"}}}}}};
  JsonPointer path = JsonPointer().Key("metadata").Key("annotations").Key("a/b~c");
  Json patched = doc.patch(Json::array({AddOp(path, "new")}));
  EXPECT_EQ(patched["metadata"]["annotations"]["a/b~c"], "new");
  EXPECT_EQ(patched["metadata"]["annotations"].size(), 1u);
}

TEST(JsonReadTest, WrongTypesReadAsAbsent) {
  Json obj = {{"s", "text"}, {"n", 3}, {"a", Json::array({1})}, {"o", Json::object()}};
  EXPECT_EQ(StringMember(obj, "s"), "text");
  EXPECT_EQ(StringMember(obj, "n"), "");
  EXPECT_EQ(StringMember(obj, "missing"), "");
  EXPECT_EQ(StringMember(Json("not an object"), "s"), "");
  EXPECT_NE(ArrayMember(obj, "a"), nullptr);
  EXPECT_EQ(ArrayMember(obj, "o"), nullptr);
  EXPECT_NE(ObjectMember(obj, "o"), nullptr);
  EXPECT_EQ(ObjectMember(obj, "a"), nullptr);
  EXPECT_EQ(Member(Json::array(), "a"), nullptr);
}

}  // namespace
}  // namespace missile::webhook
