#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::store {

// The little XML that S3 answers with: elements, text, entities, comments, CDATA and the <?xml?>
// declaration. Attributes are skipped (S3 puts only xmlns there) and namespace prefixes dropped.
// Not a general XML parser: no DTDs, and mixed content keeps only the text.
struct XmlElement {
  std::string name;  // local name
  std::string text;  // character data directly inside, entities decoded
  std::vector<XmlElement> children;

  // The first child named `name`, or nullptr.
  [[nodiscard]] const XmlElement* child(std::string_view name) const;
  // The text of the first child named `name`; empty when there is none.
  [[nodiscard]] std::string child_text(std::string_view name) const;
  // Every child named `name`, in order.
  [[nodiscard]] std::vector<const XmlElement*> children_named(std::string_view name) const;
};

// The document's root element. parse_error with the byte offset for malformed input; nesting
// deeper than 64 levels is refused.
[[nodiscard]] Result<XmlElement> parse_xml(std::string_view text);

// Escapes & < > " ' for element text.
[[nodiscard]] std::string xml_escape(std::string_view text);

}  // namespace gpuhost::store
