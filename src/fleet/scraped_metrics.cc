#include "fleet/scraped_metrics.h"

namespace kvroute::fleet {

double EngineMetrics::AgeSeconds(Nanos now) const {
  return now > scraped_at ? ToSeconds(now - scraped_at) : 0.0;
}

sched::ScrapedMetrics EngineMetrics::ToScraped(Nanos now) const {
  return {.age_s = AgeSeconds(now),
          .num_waiting = num_waiting,
          .num_running = num_running,
          .kv_usage = kv_usage};
}

}  // namespace kvroute::fleet
