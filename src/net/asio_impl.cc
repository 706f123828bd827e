// The one translation unit that compiles Asio and Beast (the project defines
// BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION for every target), so
// other TUs that include their headers only instantiate templates.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
