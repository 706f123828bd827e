// ShortNumber: the one compact rendering of a number for tables, CSV cells and notes ("%g":
// six significant digits, no trailing zeros), shared by bench's reports, simulate's files
// and the demo's text.
//
// Thread safety: a pure function.
#pragma once

#include <string>

namespace kvroute {

std::string ShortNumber(double v);

}  // namespace kvroute
