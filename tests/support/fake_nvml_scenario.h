// The scenario file the fake NVML (tests/support/fake_nvml.cc) plays, named to it through
// GRANARY_FAKE_NVML for this process and its children; removed when done.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace granary::testing {

class FakeNvmlScenario {
 public:
  FakeNvmlScenario()
      : file_(std::filesystem::temp_directory_path() /
              ("granary-fake-nvml-" + std::to_string(::getpid()) + ".txt")) {
    ::setenv("GRANARY_FAKE_NVML", file_.c_str(), 1);
  }
  ~FakeNvmlScenario() {
    ::unsetenv("GRANARY_FAKE_NVML");
    std::filesystem::remove(file_);
  }
  // Replaces the scenario at once (a rename, so the fake never reads half of it); the fake
  // reads it again at its next device count.
  void play(const std::string& text) const {
    const std::filesystem::path next = file_.string() + ".next";
    std::ofstream(next) << text;
    std::filesystem::rename(next, file_);
  }

 private:
  std::filesystem::path file_;
};

}  // namespace granary::testing
