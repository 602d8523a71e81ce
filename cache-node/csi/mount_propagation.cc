#include "cache-node/csi/mount_propagation.h"

#include <fstream>
#include <optional>
#include <sstream>

namespace granary::cache {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view digits = field.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>(std::stoi(std::string(digits), nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

// Whether `point` is `path` or one of its ancestors, component by component.
bool holds(const std::string& point, const std::string& path) {
  if (point == "/") return true;
  return path == point || (path.starts_with(point) && path[point.size()] == '/');
}

}  // namespace

Result<MountOfPath> mountHolding(const std::filesystem::path& path, std::string_view mountinfo) {
  const std::string target = path.lexically_normal().string();
  std::optional<MountOfPath> best;
  std::istringstream lines{std::string(mountinfo)};
  for (std::string line; std::getline(lines, line);) {
    // id parent major:minor root mount-point options [optional fields...] - type source options
    std::istringstream fields(line);
    std::string id, parent, device, root, point, options;
    if (!(fields >> id >> parent >> device >> root >> point >> options)) continue;
    point = unescape(point);
    if (!holds(point, target)) continue;
    MountOfPath mount{.point = point};
    for (std::string tag; fields >> tag && tag != "-";)
      mount.shared = mount.shared || tag.starts_with("shared:");
    if (!best || point.size() >= best->point.size()) best = std::move(mount);
  }
  if (!best) return invalidArgument("no mount in mountinfo holds " + target);
  return *best;
}

Status checkSharedMounts(const std::vector<std::string>& directories) {
  std::ifstream file("/proc/self/mountinfo");
  const std::string mountinfo(std::istreambuf_iterator<char>(file), {});
  std::string problems;
  for (const std::string& directory : directories) {
    std::error_code error;
    const std::filesystem::path path = std::filesystem::weakly_canonical(directory, error);
    auto mount = mountHolding(error ? std::filesystem::path(directory) : path, mountinfo);
    if (!mount.isOk()) return mount.status();
    if (mount->shared) continue;
    problems +=
        (problems.empty() ? "" : "; ") + directory + " is on " + mount->point + ", a private mount";
  }
  if (problems.empty()) return Status::ok();
  return failedPrecondition(
      problems +
      ": mounts made there reach neither the host nor the pods (mountPropagation: Bidirectional "
      "needs the host's mount to be shared). Fix: on the host, run `mount --make-rshared /` (or "
      "on the mount named) and make it last across reboots (systemd does it at boot; see "
      "docs/install.md), then restart this pod");
}

}  // namespace granary::cache
