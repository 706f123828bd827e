// nginx as a baseline router for `kvroute bench compare`: the configuration text (pure, unit
// tested) and nothing else; cluster.h runs it as a child process.
//
// The configuration is that of a fair OpenAI-endpoint load balancer: HTTP/1.1 keep-alive
// upstream connections, no response buffering (SSE streams token by token), no request
// buffering, long read timeouts (a request can queue for minutes), one process
// (master_process off: the pid we start is the only one to stop), every path inside `dir`.
//
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

namespace kvroute::bench {

struct NginxOptions {
  std::vector<std::string> upstreams;  // "127.0.0.1:PORT" of each worker
  bool least_conn = false;             // false: nginx's default round robin
  int listen_port = 0;                 // on 127.0.0.1
  std::string dir;                     // absolute prefix folder: pid, logs, temp paths
  int keepalive = 64;                  // idle upstream connections kept per process
};

std::string NginxConfig(const NginxOptions& options);

}  // namespace kvroute::bench
