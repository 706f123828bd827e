// Built-in pickers (contract in plugin.h). Every picker first orders rows by worker id, so
// the choice never depends on the order the caller listed workers in.
//
//   argmin       lowest total cost; exact ties broken uniformly at random (seeded)
//   softmax      samples p(i) ∝ exp(-c'(i) / temperature), c' = min-max normalised cost in
//                [0, 1] (Dynamo's form); temperature 0 is argmin
//   random       uniform over the rows, costs ignored
//   round_robin  the next worker id after PolicyState::last_round_robin, wrapping; the
//                cursor lives in PolicyState (owned by the caller), not in the picker
//
// Thread safety: const methods only; share freely. PolicyState is the caller's.
#pragma once

#include <memory>

#include "sched/plugin.h"

namespace kvroute::sched {

std::shared_ptr<const Picker> NewArgminPicker();
// REQUIRES: temperature finite and >= 0 (the registry validates).
std::shared_ptr<const Picker> NewSoftmaxPicker(double temperature);
std::shared_ptr<const Picker> NewRandomPicker();
std::shared_ptr<const Picker> NewRoundRobinPicker();

class Registry;
// Adds the built-in pickers with their YAML options to `registry` (Registry::Builtin).
void RegisterBuiltinPickers(Registry& registry);

}  // namespace kvroute::sched
