// Fixture: the engine model reaching into the index's internals.
#include "kv/block_key.h"
#include "kv/index_lookup.h"
