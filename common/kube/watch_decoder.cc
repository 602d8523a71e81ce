#include "common/kube/watch_decoder.h"

namespace granary::kube {

Status WatchDecoder::feed(std::string_view bytes, std::vector<WatchEvent>& out) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      if (partial_.size() + bytes.size() > maxLineBytes_) {
        return internalError("watch event longer than " + std::to_string(maxLineBytes_) + " bytes");
      }
      partial_.append(bytes);
      return Status::ok();
    }
    // The same limit whether the line came in one piece or several.
    if (partial_.size() + newline > maxLineBytes_) {
      return internalError("watch event longer than " + std::to_string(maxLineBytes_) + " bytes");
    }
    if (partial_.empty()) {
      GRANARY_RETURN_IF_ERROR(decodeLine(bytes.substr(0, newline), out));
    } else {
      partial_.append(bytes.substr(0, newline));
      std::string line = std::move(partial_);
      partial_.clear();
      GRANARY_RETURN_IF_ERROR(decodeLine(line, out));
    }
    bytes.remove_prefix(newline + 1);
  }
  return Status::ok();
}

Status WatchDecoder::decodeLine(std::string_view line, std::vector<WatchEvent>& out) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return Status::ok();
  Result<Json> parsed = parseJson(line);
  if (!parsed) return internalError("watch event is " + parsed.status().message());
  Json& json = parsed.value();
  if (!json.is_object() || !json.has_string_field("type") || !json.has_object_field("object")) {
    return internalError("watch event lacks type or object: " + std::string(line.substr(0, 120)));
  }
  const std::string type = json.at("type").as_string();
  WatchEvent event;
  if (type == "ADDED")
    event.type = WatchEvent::Type::kAdded;
  else if (type == "MODIFIED")
    event.type = WatchEvent::Type::kModified;
  else if (type == "DELETED")
    event.type = WatchEvent::Type::kDeleted;
  else if (type == "BOOKMARK")
    event.type = WatchEvent::Type::kBookmark;
  else if (type == "ERROR")
    event.type = WatchEvent::Type::kError;
  else
    return internalError("unknown watch event type \"" + type + "\"");
  event.object = std::move(json.at("object"));
  out.push_back(std::move(event));
  return Status::ok();
}

}  // namespace granary::kube
