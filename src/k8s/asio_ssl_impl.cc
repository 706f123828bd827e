// The compiled part of Asio's SSL layer. The project builds Asio separately
// (BOOST_ASIO_SEPARATE_COMPILATION, src/net/asio_impl.cc), whose src.hpp leaves SSL out; the
// Kubernetes API client (api_client.cc) is its only user. Exactly one translation unit in the
// binary may include this: move it to src/net/ if another module needs TLS.
#include <boost/asio/ssl/impl/src.hpp>
