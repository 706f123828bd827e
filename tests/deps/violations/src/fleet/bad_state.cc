// Fixture: the router state doing I/O.
#include <boost/asio/io_context.hpp>
#include "net/http_server.h"
