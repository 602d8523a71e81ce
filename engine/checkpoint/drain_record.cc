#include "engine/checkpoint/drain_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/errno_status.h"
#include "common/owned_fd.h"

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
  const std::filesystem::path next = file.string() + ".next";
  OwnedFd out(::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  const auto failed = [&](const char* what) {
    return errnoStatus(errno, std::string("cannot ") + what + " " + next.string());
  };
  if (!out) return failed("create");
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(out.get(), text.data() + done, text.size() - done);
    if (n < 0) return failed("write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(out.get()) != 0) return failed("sync");
  if (::rename(next.c_str(), file.c_str()) != 0) return failed("rename");
  return Status::ok();
}

}  // namespace granary::checkpoint
