// Small text files of a pod's service account (token, CA, namespace), read whole. Shared by
// the API client (the token on every request, so a rotated token is picked up) and the
// watcher's in-cluster defaults. Thread safety: pure functions.
#pragma once

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace kvroute::k8s {

// The file's contents; nullopt when it cannot be opened.
inline std::optional<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `s` without its trailing newlines, carriage returns and spaces (a token file's last line).
inline std::string TrimTrailingSpace(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace kvroute::k8s
