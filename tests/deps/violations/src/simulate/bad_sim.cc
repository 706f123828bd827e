// Fixture: the simulator including the gateway and bench.
#include "bench/trace.h"
#include "gateway/worker_registry.h"
