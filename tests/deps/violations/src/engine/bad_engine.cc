// Fixture: the engine model reaching into the index's internals.
#include "kv/keys/block_key.h"
#include "kv/index_lookup.h"
