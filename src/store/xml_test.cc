#include "store/xml.h"

#include <gtest/gtest.h>

namespace gpuhost::store {
namespace {

TEST(Xml, ParsesElementsTextAndEntities) {
  auto xml = parse_xml(
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<!-- a comment -->\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Contents><Key>a &amp; b &lt;c&gt; &#233; &#x4E2D;</Key>"
      "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>42</Size></Contents>"
      "<Contents><Key><![CDATA[raw <key>]]></Key></Contents><Empty/></ListBucketResult>\n");
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_EQ(xml->name, "ListBucketResult");
  EXPECT_EQ(xml->child_text("Name"), "b");
  auto contents = xml->children_named("Contents");
  ASSERT_EQ(contents.size(), 2u);
  EXPECT_EQ(contents[0]->child_text("Key"), "a & b <c> \xC3\xA9 \xE4\xB8\xAD");
  EXPECT_EQ(contents[0]->child_text("ETag"), "\"9b2cf535f27731c974343645a3985328\"");
  EXPECT_EQ(contents[1]->child_text("Key"), "raw <key>");
  ASSERT_NE(xml->child("Empty"), nullptr);
  EXPECT_EQ(xml->child("Missing"), nullptr);
  EXPECT_EQ(xml->child_text("Missing"), "");
}

TEST(Xml, DropsNamespacePrefixes) {
  auto xml = parse_xml("<s3:Error><s3:Code>X</s3:Code></s3:Error>");
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_EQ(xml->name, "Error");
  EXPECT_EQ(xml->child_text("Code"), "X");
}

TEST(Xml, AcceptsLeadingWhitespaceAsS3SendsWhileCompleting) {
  // CompleteMultipartUpload keeps the connection alive with whitespace before the document.
  auto xml =
      parse_xml("     \n  <CompleteMultipartUploadResult><ETag>e</ETag></CompleteMultipartUploadResult>");
  ASSERT_TRUE(xml) << xml.error().message;
  EXPECT_EQ(xml->child_text("ETag"), "e");
}

TEST(Xml, RejectsMalformedDocuments) {
  for (const char* bad : {"", "plain text", "<a><b></a>", "<a>", "<a>&bogus;</a>", "<a>&#0;</a>",
                          "<a></a><b/>", "<a x=\"unterminated></a>", "<!-- never closed"}) {
    auto xml = parse_xml(bad);
    EXPECT_FALSE(xml) << bad;
    if (!xml) {
      EXPECT_EQ(xml.error().code, ErrorCode::parse_error);
    }
  }
}

TEST(Xml, RefusesDeepNesting) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "<a>";
  for (int i = 0; i < 100; ++i) deep += "</a>";
  auto xml = parse_xml(deep);
  ASSERT_FALSE(xml);
  EXPECT_NE(xml.error().message.find("deeply"), std::string::npos);
}

TEST(Xml, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(xml_escape("a&b<c>\"d'"), "a&amp;b&lt;c&gt;&quot;d&apos;");
  auto round_trip = parse_xml("<x>" + xml_escape("\"etag\" & <more>") + "</x>");
  ASSERT_TRUE(round_trip);
  EXPECT_EQ(round_trip->text, "\"etag\" & <more>");
}

}  // namespace
}  // namespace gpuhost::store
