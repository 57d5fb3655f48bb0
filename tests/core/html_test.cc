// HtmlEscape: the header's example, every special character, and text that needs nothing.
#include "tessera/core/html.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(HtmlEscapeTest, HeaderExample) { EXPECT_EQ(HtmlEscape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;"); }

TEST(HtmlEscapeTest, EscapesWhatCanEndAnElementOrAnAttribute) {
  EXPECT_EQ(HtmlEscape("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("&amp;"), "&amp;amp;");  // already-escaped text is escaped again, not trusted
}

TEST(HtmlEscapeTest, PlainTextAndUtf8PassThrough) {
  EXPECT_EQ(HtmlEscape(""), "");
  EXPECT_EQ(HtmlEscape("tenant-a / GPU 0 — 25 %"), "tenant-a / GPU 0 — 25 %");
}

}  // namespace
}  // namespace tessera
