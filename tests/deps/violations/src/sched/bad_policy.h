// Fixture for deps_check_fails_on_violations: sched/ reaching into the index.
#pragma once
#include "common/types.h"
#include "kv/index/index.h"
