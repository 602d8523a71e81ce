#include "engine/checkpoint/drain_record.h"

#include <fstream>
#include <sstream>

#include "common/files.h"

namespace granary::checkpoint {
namespace {

// "device inode size modified path", the path last with '\\' and '\n' escaped.
std::string lineOf(const OriginEntry& e) {
  std::string path;
  for (const char c : e.path) {
    if (c == '\\')
      path += "\\\\";
    else if (c == '\n')
      path += "\\n";
    else
      path += c;
  }
  const FileIdentity& id = e.identity;
  return std::to_string(id.device) + " " + std::to_string(id.inode) + " " +
         std::to_string(id.size) + " " + std::to_string(id.modifiedNanos) + " " + path + "\n";
}

bool parseLine(const std::string& line, OriginEntry& e) {
  std::istringstream in(line);
  FileIdentity& id = e.identity;
  if (!(in >> id.device >> id.inode >> id.size >> id.modifiedNanos) || in.get() != ' ')
    return false;
  std::string rest;
  std::getline(in, rest);
  e.path.clear();
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '\\') {
      e.path += rest[i];
    } else if (++i < rest.size() && (rest[i] == '\\' || rest[i] == 'n')) {
      e.path += rest[i] == 'n' ? '\n' : '\\';
    } else {
      return false;
    }
  }
  return !e.path.empty();
}

}  // namespace

Result<std::vector<OriginEntry>> readDrainRecord(const std::filesystem::path& file) {
  std::error_code error;
  if (!std::filesystem::exists(file, error) && !error) return std::vector<OriginEntry>{};
  std::ifstream in(file);
  if (!in) return unavailable("cannot read " + file.string());
  std::vector<OriginEntry> entries;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    OriginEntry e;
    if (!parseLine(line, e))
      return corruption(file.string() + " line " + std::to_string(number) + " does not parse");
    entries.push_back(std::move(e));
  }
  return entries;
}

Status writeDrainRecord(const std::filesystem::path& file,
                        const std::vector<OriginEntry>& entries) {
  std::string text;
  for (const OriginEntry& e : entries) text += lineOf(e);
  return writeFileDurably(file.string(), text);
}

}  // namespace granary::checkpoint
