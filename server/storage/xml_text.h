// Just enough XML for S3's answers, which are flat and machine-written:
// the text of elements by tag name, entities decoded. Not a general XML
// parser: no attributes, namespaces prefixes or CDATA are understood.
//
// Thread-safe: pure functions.
#ifndef STOKER_SERVER_STORAGE_XML_TEXT_H_
#define STOKER_SERVER_STORAGE_XML_TEXT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stoker::storage {

// The decoded text of every <tag>...</tag> in `xml`, in order; an element
// with attributes (<tag a="b">) counts too.
std::vector<std::string> XmlTexts(std::string_view xml, std::string_view tag);

// The first of them, or nullopt.
std::optional<std::string> XmlText(std::string_view xml, std::string_view tag);

// `text` with & < > " ' written as entities.
std::string XmlEscape(std::string_view text);

}  // namespace stoker::storage

#endif  // STOKER_SERVER_STORAGE_XML_TEXT_H_
