#include "common/format.h"

#include <cstdio>

namespace kvroute {

std::string ShortNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace kvroute
