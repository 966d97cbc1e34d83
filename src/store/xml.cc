#include "store/xml.h"

#include <cctype>
#include <cstdint>
#include <optional>

#include "base/strings.h"

namespace gpuhost::store {
namespace {

constexpr int k_max_depth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : m_text(text) {}

  Result<XmlElement> document() {
    if (m_text.starts_with("\xEF\xBB\xBF")) m_pos = 3;
    if (!skip_misc()) return std::unexpected(*m_error);
    if (!at("<")) return fail("expected the root element");
    XmlElement root = GPUHOST_TRY(element(0));
    if (!skip_misc()) return std::unexpected(*m_error);
    if (m_pos != m_text.size()) return fail("content after the root element");
    return root;
  }

 private:
  bool at(std::string_view s) const { return m_text.substr(m_pos).starts_with(s); }

  std::unexpected<Error> fail(std::string_view why) const {
    return make_error(ErrorCode::parse_error,
                      "parsing XML at byte " + std::to_string(m_pos) + ": " + std::string(why));
  }

  // Moves past the next `end`; false (with m_error set) when there is none.
  bool skip_past(std::string_view end, std::string_view what) {
    std::size_t found = m_text.find(end, m_pos);
    if (found == std::string_view::npos) return note(fail("unterminated " + std::string(what)));
    m_pos = found + end.size();
    return true;
  }

  bool note(std::unexpected<Error> error) {
    m_error = error.error();
    return false;
  }

  void skip_space() {
    while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos]))) ++m_pos;
  }

  // Whitespace, comments, processing instructions and a DOCTYPE (without an internal subset).
  bool skip_misc() {
    for (;;) {
      skip_space();
      bool ok = true;
      if (at("<?"))
        ok = skip_past("?>", "processing instruction");
      else if (at("<!--"))
        ok = skip_past("-->", "comment");
      else if (at("<!DOCTYPE"))
        ok = skip_past(">", "DOCTYPE");
      else
        return true;
      if (!ok) return false;
    }
  }

  std::string name() {
    std::size_t start = m_pos;
    while (m_pos < m_text.size()) {
      char c = m_text[m_pos];
      if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '>' || c == '=') break;
      ++m_pos;
    }
    std::string_view full = m_text.substr(start, m_pos - start);
    std::size_t colon = full.rfind(':');
    return std::string(colon == std::string_view::npos ? full : full.substr(colon + 1));
  }

  bool decode_text(std::string_view raw, std::string& out) {
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      std::size_t semi = raw.find(';', i);
      if (semi == std::string_view::npos) return note(fail("'&' without ';'"));
      std::string_view entity = raw.substr(i + 1, semi - i - 1);
      if (entity == "amp")
        out += '&';
      else if (entity == "lt")
        out += '<';
      else if (entity == "gt")
        out += '>';
      else if (entity == "quot")
        out += '"';
      else if (entity == "apos")
        out += '\'';
      else if (entity.starts_with("#")) {
        bool hex = entity.size() > 1 && (entity[1] == 'x' || entity[1] == 'X');
        auto cp = parse_int(entity.substr(hex ? 2 : 1), hex ? 16 : 10);
        if (!cp || *cp <= 0 || *cp > 0x10FFFF)
          return note(fail("bad character reference &" + std::string(entity) + ";"));
        append_utf8(out, static_cast<std::uint32_t>(*cp));
      } else {
        return note(fail("unknown entity &" + std::string(entity) + ";"));
      }
      i = semi;
    }
    return true;
  }

  Result<XmlElement> element(int depth) {
    if (depth >= k_max_depth) return fail("nested too deeply");
    ++m_pos;  // '<'
    XmlElement e;
    e.name = name();
    if (e.name.empty()) return fail("element without a name");
    // Attributes: skipped, quoted values included.
    for (;;) {
      skip_space();
      if (m_pos >= m_text.size()) return fail("unterminated start tag <" + e.name + ">");
      char c = m_text[m_pos];
      if (at("/>")) {
        m_pos += 2;
        return e;
      }
      if (c == '>') {
        ++m_pos;
        break;
      }
      if (c == '"' || c == '\'') {
        std::size_t close = m_text.find(c, m_pos + 1);
        if (close == std::string_view::npos) return fail("unterminated attribute value");
        m_pos = close + 1;
      } else {
        ++m_pos;
      }
    }
    for (;;) {
      if (m_pos >= m_text.size()) return fail("element <" + e.name + "> is not closed");
      if (at("</")) {
        m_pos += 2;
        std::string closing = name();
        skip_space();
        if (closing != e.name || !at(">")) return fail("expected </" + e.name + ">");
        ++m_pos;
        return e;
      }
      bool ok = true;
      if (at("<!--")) {
        ok = skip_past("-->", "comment");
      } else if (at("<![CDATA[")) {
        std::size_t start = m_pos + 9;
        ok = skip_past("]]>", "CDATA section");
        if (ok) e.text.append(m_text.substr(start, m_pos - 3 - start));
      } else if (at("<?")) {
        ok = skip_past("?>", "processing instruction");
      } else if (at("<")) {
        e.children.push_back(GPUHOST_TRY(element(depth + 1)));
      } else {
        std::size_t next = m_text.find('<', m_pos);
        if (next == std::string_view::npos) next = m_text.size();
        ok = decode_text(m_text.substr(m_pos, next - m_pos), e.text);
        m_pos = next;
      }
      if (!ok) return std::unexpected(*m_error);
    }
  }

  std::string_view m_text;
  std::size_t m_pos = 0;
  std::optional<Error> m_error;  // why the last bool-returning step failed
};

}  // namespace

const XmlElement* XmlElement::child(std::string_view wanted) const {
  for (const XmlElement& c : children)
    if (c.name == wanted) return &c;
  return nullptr;
}

std::string XmlElement::child_text(std::string_view wanted) const {
  const XmlElement* c = child(wanted);
  return c ? c->text : std::string();
}

std::vector<const XmlElement*> XmlElement::children_named(std::string_view wanted) const {
  std::vector<const XmlElement*> out;
  for (const XmlElement& c : children)
    if (c.name == wanted) out.push_back(&c);
  return out;
}

Result<XmlElement> parse_xml(std::string_view text) {
  return Parser(text).document();
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace gpuhost::store
