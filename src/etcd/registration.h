// Registration: one key kept alive in etcd under a lease — what `kvroute sim --etcd` (and any
// launcher, docs/etcd.md) does so that a crashed worker disappears by itself.
//
//   Start    grant a lease of `ttl_s`, put the key with it (once, on the caller's thread),
//            then a thread sends a keepalive every ttl/3
//   lease gone (keepalive TTL 0, NotFound)   grant a new lease and put the key again
//   etcd unreachable                          retry with backoff (250 ms doubling to
//                                             `max_backoff`); the lease may expire meanwhile,
//                                             and the next keepalive then re-registers
//   Update   put a new value now (the draining flag) and on every later re-registration
//   Stop     stop the thread; with `revoke` delete the key at once (revoke the lease)
//
// Ownership: borrows the client (must outlive this). Thread safety: every method from any
// thread; Start once, Stop once (the destructor stops without revoking).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "etcd/client.h"

namespace kvroute::etcd {

struct RegistrationOptions {
  std::string key;
  std::int64_t ttl_s = 10;  // Dynamo's default; Infera uses 30
  std::chrono::milliseconds max_backoff{5'000};
};

struct RegistrationStatus {
  bool registered = false;  // the key is believed to exist under `lease`
  std::int64_t lease = 0;
  std::uint64_t registrations = 0;  // successful grant + put pairs (1 after a clean Start)
  std::uint64_t failures = 0;       // calls that failed
  std::string last_error;
};

class Registration {
 public:
  Registration(EtcdClient* client, RegistrationOptions options, std::string value);
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  // First registration on this thread; the keepalive thread starts either way and keeps
  // trying, so an error here means "not registered yet", not "given up".
  Result<void> Start();
  // Puts `value` now (under the current lease) and remembers it for re-registrations.
  Result<void> Update(std::string value);
  void Stop(bool revoke);
  RegistrationStatus status() const;

 private:
  Result<void> RegisterLocked();  // REQUIRES: call_mu_ held
  void Loop();

  EtcdClient* const client_;
  const RegistrationOptions options_;
  // call_mu_ serialises etcd calls (keepalive thread vs Update/Stop); mu_ guards the fields.
  std::mutex call_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string value_;           // guarded by mu_
  RegistrationStatus status_;   // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  std::thread thread_;
};

}  // namespace kvroute::etcd
