// Differential test: the real index against the plain reference model of
// kv/index/index_reference_model.h on seeded random event streams: stores with shared prefixes and
// branches, continuation runs, removals (including unknown hashes and wrong tiers), duplicate
// stores, salted duplicates, clears, worker removal, staleness, LoRA names, unknown media and
// other KV cache groups. Worker 6 publishes kvroute's own keys as engine hashes (the index
// keeps no engine map for it), worker 5 too except for salted prompts, which switch it to a
// map. Every lookup of random prompts (many diverging midway) must agree, and so must a copy
// restored from a snapshot; every 500 steps the stats and the model's counters must too. On
// failure the seed and step are printed.
//
// Per-worker merges (KvIndex::RestoreWorker) are checked at the same points: every worker of
// the snapshot merged one by one into an empty index gives the snapshot's bytes again; and a
// second, live index (`shadow`) that follows the odd workers' events from the start gets the
// even workers merged in from the snapshot at the first checkpoint (then follows them too), and
// at each later checkpoint has one worker removed and merged back: its Dump must equal the main
// index's and its lookups and stats the model's (the union of live and merged workers).
//
// Sequence numbers: every worker but 3 gets its batches with a per-worker sequence (restarting
// at 0 after RemoveWorker, as an engine restart does), worker 3 without. At each checkpoint
// each worker's applied sequence in the snapshot must be its last batch's, and replaying every
// batch of every worker since its creation into the index merged from the snapshot (what a
// subscriber replaying the engine's whole buffer would deliver) must change nothing: its Dump
// stays the snapshot's bytes (no copy counted twice).
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "kv/index/index.h"
#include "kv/index/index_reference_model.h"
#include "kv/index/index_snapshot.h"
#include "kv/index/index_test_util.h"

namespace kvroute::kv {
namespace {

using testing::ByWorker;
using testing::ReferenceIndex;
using testing::SyntheticEngineHash;
using testing::TokensOf;

// Prompts: block contents drawn from a 3-letter alphabet so prefixes are widely shared and
// branch often, plus a LoRA name and a salt.
using Prompt = testing::SyntheticPrompt;

class StreamGenerator {
 public:
  explicit StreamGenerator(std::uint64_t seed) : rng_(seed) {}

  Prompt RandomPrompt() {
    Prompt p;
    const int len = 1 + Uniform(14);
    for (int i = 0; i < len; ++i) p.contents.push_back(Uniform(3));
    p.lora = Uniform(6) == 0 ? "adapter-a" : "";
    p.salt = Uniform(8) == 0 ? 1 : 0;
    return p;
  }

  std::string RandomMedium() {
    switch (Uniform(20)) {
      case 0:
        return "TAPE";
      case 1:
      case 2:
      case 3:
        return "CPU";
      case 4:
      case 5:
        return "DISK";
      case 6:
        return "SHARED";
      default:
        return "GPU";
    }
  }

  int Uniform(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

 private:
  std::mt19937_64 rng_;
};

// RunSeed's per-worker merge checks at one checkpoint (see the file comment). `image` is the
// main index's Dump().
// A worker's batches since it was created, with their sequence numbers.
using History = std::map<WorkerId, std::vector<std::pair<std::uint64_t, KvEventBatch>>>;

void MergeCheckpoint(const BlockKeyer& keyer, const std::string& image, int step, KvIndex* shadow,
                     bool* evens_merged, const History& history) {
  auto snapshot = IndexSnapshot::Parse(image, keyer);
  ASSERT_TRUE(snapshot.has_value()) << snapshot.error();
  const std::vector<WorkerId> workers = snapshot->workers();
  KvIndex merged(keyer);
  for (WorkerId w : workers) {
    auto r = merged.RestoreWorker(*snapshot, w, w);
    ASSERT_TRUE(r.has_value()) << "step=" << step << " worker=" << w << ": " << r.error();
    auto h = history.find(w);
    const std::optional<std::uint64_t> last =
        h == history.end() || h->second.empty() ? std::nullopt
                                                : std::optional(h->second.back().first);
    ASSERT_EQ(snapshot->applied_seq(w), last) << "step=" << step << " worker=" << w;
    ASSERT_EQ(merged.AppliedSeq(w), last) << "step=" << step << " worker=" << w;
  }
  ASSERT_EQ(merged.Dump(), image) << "step=" << step;
  // The engines' whole replay buffers delivered on top of the merge: all of it is there.
  const std::uint64_t before = merged.counters().duplicate_batches;
  std::uint64_t replayed = 0;
  for (const auto& [w, batches] : history) {
    for (const auto& [seq, batch] : batches) merged.ApplyBatch(w, batch, seq);
    replayed += batches.size();
  }
  ASSERT_EQ(merged.counters().duplicate_batches - before, replayed) << "step=" << step;
  ASSERT_EQ(merged.Dump(), image) << "step=" << step << " after a replay";
  if (!*evens_merged) {
    for (WorkerId w : workers) {
      if (w % 2 != 0) continue;
      auto r = shadow->RestoreWorker(*snapshot, w, w);
      ASSERT_TRUE(r.has_value()) << "step=" << step << " worker=" << w << ": " << r.error();
    }
    *evens_merged = true;
  } else if (!workers.empty()) {
    const WorkerId again = workers[(step / 500) % workers.size()];
    if (snapshot->entries(again) > 0) {
      // It holds blocks in the shadow: refused, and nothing changes.
      ASSERT_FALSE(shadow->RestoreWorker(*snapshot, again, again).has_value()) << step;
      ASSERT_EQ(shadow->Dump(), image) << "step=" << step << " after a refused merge";
    }
    shadow->RemoveWorker(again);
    auto r = shadow->RestoreWorker(*snapshot, again, again);
    ASSERT_TRUE(r.has_value()) << "step=" << step << " worker=" << again << ": " << r.error();
  }
  ASSERT_EQ(shadow->Dump(), image) << "step=" << step << " (shadow)";
}

void RunSeed(std::uint64_t seed, int steps) {
  SCOPED_TRACE("seed=" + std::to_string(seed));
  BlockKeyer keyer;
  KvIndex index(keyer);
  ReferenceIndex ref(keyer);
  StreamGenerator gen(seed);
  constexpr int kWorkers = 6;
  // Hashes each worker has stored, with the medium, to aim removals at real blocks.
  std::map<WorkerId, std::vector<std::pair<EngineHash, std::string>>> stored;
  std::vector<Prompt> recent;

  KvIndex shadow(keyer);
  bool evens_merged = false;
  History history;  // workers fed with sequence numbers (all but worker 3)
  auto follows = [&](WorkerId w) { return w % 2 == 1 || evens_merged; };
  auto apply = [&](WorkerId w, const KvEvent& e) {
    ref.Apply(w, e);
    const KvEventBatch batch = testing::Batch({e});
    if (w == 3) {
      index.ApplyBatch(w, batch);
      if (follows(w)) shadow.ApplyBatch(w, batch);
      return;
    }
    auto& mine = history[w];
    const std::uint64_t seq = mine.empty() ? 0 : mine.back().first + 1;
    mine.emplace_back(seq, batch);
    index.ApplyBatch(w, batch, seq);
    if (follows(w)) shadow.ApplyBatch(w, batch, seq);
  };
  auto compare = [&](const std::vector<BlockKey>& keys, int step, const KvIndex& idx) {
    auto want = ref.Lookup(keys);
    auto got = ByWorker(idx.Lookup(keys));
    ASSERT_EQ(got, want) << "seed=" << seed << " step=" << step << " keys=" << keys.size();
  };

  for (int step = 0; step < steps; ++step) {
    const WorkerId w = static_cast<WorkerId>(1 + gen.Uniform(kWorkers));
    const int op = gen.Uniform(100);
    if (op < 40) {
      // Store a run [from, to) of a prompt, often a continuation of an earlier prompt.
      Prompt p = (!recent.empty() && gen.Uniform(2) == 0)
                     ? recent[gen.Uniform(static_cast<int>(recent.size()))]
                     : gen.RandomPrompt();
      if (recent.size() < 32) {
        recent.push_back(p);
      } else {
        recent[gen.Uniform(32)] = p;
      }
      const int len = static_cast<int>(p.contents.size());
      const int from = gen.Uniform(3) == 0 ? gen.Uniform(len) : 0;
      const int to = from + 1 + gen.Uniform(len - from);
      BlockStored s;
      for (int i = from; i < to; ++i) s.block_hashes.push_back(SyntheticEngineHash(keyer, w, p, i));
      if (from > 0) s.parent_block_hash = SyntheticEngineHash(keyer, w, p, from - 1);
      s.token_ids = TokensOf({p.contents.begin() + from, p.contents.begin() + to});
      s.medium = gen.RandomMedium();
      if (!p.lora.empty()) s.lora_name = p.lora;
      if (gen.Uniform(40) == 0) s.group_idx = 1;
      for (EngineHash h : s.block_hashes) stored[w].emplace_back(h, *s.medium);
      apply(w, s);
    } else if (op < 75) {
      BlockRemoved r;
      auto& mine = stored[w];
      const int n = 1 + gen.Uniform(3);
      for (int k = 0; k < n; ++k) {
        if (mine.empty() || gen.Uniform(10) == 0) {
          r.block_hashes.push_back(0xDEAD0000ULL + gen.Uniform(1000));  // unknown
          continue;
        }
        auto& [h, medium] = mine[gen.Uniform(static_cast<int>(mine.size()))];
        r.block_hashes.push_back(h);
        r.medium = gen.Uniform(8) == 0 ? gen.RandomMedium() : medium;
      }
      apply(w, r);
    } else if (op < 77) {
      apply(w, AllBlocksCleared{});
      stored[w].clear();
    } else if (op < 78) {
      ref.RemoveWorker(w);
      index.RemoveWorker(w);
      if (follows(w)) shadow.RemoveWorker(w);
      stored[w].clear();
      history.erase(w);  // a restarted engine numbers from 0 again
    } else if (op < 80) {
      const bool stale = gen.Uniform(2) == 0;
      if (stale) {
        ref.MarkStale(w);
        index.MarkStale(w);
        if (follows(w)) shadow.MarkStale(w);
      } else {
        ref.ClearStale(w);
        index.ClearStale(w);
        if (follows(w)) shadow.ClearStale(w);
      }
    } else {
      // Lookups: a recent prompt, a recent prompt diverging midway, or a random one.
      Prompt p = recent.empty() ? gen.RandomPrompt()
                                : recent[gen.Uniform(static_cast<int>(recent.size()))];
      if (gen.Uniform(3) == 0) p.contents[gen.Uniform(static_cast<int>(p.contents.size()))] = 7;
      if (gen.Uniform(4) == 0) p = gen.RandomPrompt();
      compare(keyer.Keys(TokensOf(p.contents), ExtraKeyInputs{.lora_name = p.lora}), step, index);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (step % 500 == 499) {
      KvIndex copy(keyer);
      const std::string image = index.Dump();
      auto restored = copy.Restore(image);
      ASSERT_TRUE(restored.has_value()) << restored.error();
      ASSERT_EQ(index.stats().engine_hashes, ref.Stats(/*nodes=*/false).engine_hashes)
          << "step=" << step;
      ASSERT_EQ(copy.stats().engine_hashes, ref.Stats(/*nodes=*/false).engine_hashes)
          << "step=" << step;
      ASSERT_EQ(copy.Dump(), image) << "step=" << step;
      ASSERT_EQ(testing::StatsTuple(index.stats()), testing::StatsTuple(ref.Stats()))
          << "step=" << step;
      ASSERT_EQ(testing::ModeledCounters(index.counters()), testing::ModeledCounters(ref.counters))
          << "step=" << step;
      for (const Prompt& p : recent) {
        compare(keyer.Keys(TokensOf(p.contents), ExtraKeyInputs{.lora_name = p.lora}), step, copy);
        if (::testing::Test::HasFatalFailure()) return;
      }
      MergeCheckpoint(keyer, image, step, &shadow, &evens_merged, history);
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(testing::StatsTuple(shadow.stats()), testing::StatsTuple(ref.Stats()))
          << "step=" << step;
      for (const Prompt& p : recent) {
        compare(keyer.Keys(TokensOf(p.contents), ExtraKeyInputs{.lora_name = p.lora}), step,
                shadow);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(IndexDifferentialTest, AgreesWithReferenceModelAcrossSeeds) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    RunSeed(seed, 4000);
    if (HasFatalFailure()) return;
  }
}

// Long prompts exercise the galloping search (and its fallback when holes exist) over
// distances a 14-block prompt cannot reach.
TEST(IndexDifferentialTest, LongChainsWithHolesAgreeWithReferenceModel) {
  for (std::uint64_t seed = 100; seed < 104; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    BlockKeyer keyer;
    KvIndex index(keyer);
    ReferenceIndex ref(keyer);
    std::vector<std::uint32_t> contents(600);
    for (auto& c : contents) c = static_cast<std::uint32_t>(rng() % 1000);
    for (WorkerId w = 1; w <= 20; ++w) {
      const std::size_t depth = rng() % contents.size() + 1;
      BlockStored s;
      for (std::size_t i = 0; i < depth; ++i) s.block_hashes.push_back(w * 100000 + i);
      s.token_ids = TokensOf({contents.begin(), contents.begin() + depth});
      s.medium = (w % 3 == 0) ? "CPU" : "GPU";
      ref.Apply(w, s);
      index.ApplyEvent(w, s);
      if (w % 4 == 0 && depth > 2) {  // a hole
        BlockRemoved r;
        r.block_hashes.push_back(w * 100000 + rng() % (depth - 1));
        r.medium = s.medium;
        ref.Apply(w, r);
        index.ApplyEvent(w, r);
      }
    }
    for (std::size_t cut = 1; cut <= contents.size(); cut += 37) {
      auto p = contents;
      if (cut < p.size()) p[cut] = 5000;  // diverge at `cut`
      auto keys = keyer.Keys(TokensOf(p));
      ASSERT_EQ(ByWorker(index.Lookup(keys)), ref.Lookup(keys)) << "cut=" << cut;
    }
  }
}

}  // namespace
}  // namespace kvroute::kv
