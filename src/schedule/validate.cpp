// The schedule validator: a model of what each op reads, writes and frees, checked against the
// happens-before order that the dependencies give (not the list order, which is only one of the
// orders an executor may choose).
#include "schedule/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "core/error.hpp"
#include "schedule/op_effects.hpp"
#include "schedule/unit_lifecycle.hpp"
#include "schedule/unit_timeline.hpp"

namespace strata {

namespace {

class Validator {
 public:
  explicit Validator(const StepSchedule& s) : s_(s), n_(static_cast<int>(s.ops.size())) {}

  ScheduleCheck run() {
    structure();
    if (!order_ok_) return std::move(out_);  // happens-before needs deps that point back
    ancestors();
    pairs();
    data_flow();
    memory();
    lifecycle();
    return std::move(out_);
  }

 private:
  template <class... Args>
  void problem(fmt::format_string<Args...> f, Args&&... args) {
    out_.problems.push_back(fmt::format(f, std::forward<Args>(args)...));
  }
  std::string op(int i) const { return describe_op(s_, i); }
  const ScheduleOp& at(int i) const { return s_.ops[static_cast<std::size_t>(i)]; }
  bool before(int a, int b) const {  // a happens before b
    return (anc_[static_cast<std::size_t>(b)][static_cast<std::size_t>(a) / 64] >> (a % 64)) & 1U;
  }

  // Dependencies in range, pointing back (the list order is an execution order), acyclic, and
  // segments that tile the list.
  void structure() {
    std::vector<int> indegree(static_cast<std::size_t>(n_), 0);
    std::vector<std::vector<int>> users(static_cast<std::size_t>(n_));
    for (int i = 0; i < n_; ++i) {
      for (int d : at(i).deps) {
        if (d < 0 || d >= n_ || d == i) {
          problem("{} depends on op {}, which is not another op of the list", op(i), d);
          order_ok_ = false;
          continue;
        }
        if (d > i) {
          problem("{} depends on {}, which comes later in the list: the list order is not an execution order", op(i),
                  op(d));
          order_ok_ = false;
        }
        ++indegree[static_cast<std::size_t>(i)];
        users[static_cast<std::size_t>(d)].push_back(i);
      }
    }
    std::vector<int> ready;
    for (int i = 0; i < n_; ++i) {
      if (indegree[static_cast<std::size_t>(i)] == 0) ready.push_back(i);
    }
    int seen = 0;
    while (!ready.empty()) {
      const int i = ready.back();
      ready.pop_back();
      ++seen;
      for (int u : users[static_cast<std::size_t>(i)]) {
        if (--indegree[static_cast<std::size_t>(u)] == 0) ready.push_back(u);
      }
    }
    if (seen != n_) problem("the dependencies form a cycle: {} of {} ops can never run", n_ - seen, n_);
    int expect = 0;
    for (std::size_t k = 0; k < s_.segments.size(); ++k) {
      const ScheduleSegment& g = s_.segments[k];
      if (g.begin != expect || g.end < g.begin) problem("segment '{}' does not start where the one before ends", g.name);
      for (int i = g.begin; i < g.end && i < n_; ++i) {
        if (at(i).segment != static_cast<int>(k)) problem("{} says it is in segment {} but lies in '{}'", op(i), at(i).segment, g.name);
      }
      expect = g.end;
    }
    if (expect != n_) problem("the segments cover {} of the {} ops", expect, n_);
  }

  void ancestors() {
    const std::size_t words = (static_cast<std::size_t>(n_) + 63) / 64;
    anc_.assign(static_cast<std::size_t>(n_), std::vector<std::uint64_t>(words, 0));
    for (int i = 0; i < n_; ++i) {
      auto& mine = anc_[static_cast<std::size_t>(i)];
      for (int d : at(i).deps) {
        const auto& theirs = anc_[static_cast<std::size_t>(d)];
        for (std::size_t w = 0; w < words; ++w) mine[w] |= theirs[w];
        mine[static_cast<std::size_t>(d) / 64] |= std::uint64_t{1} << (d % 64);
      }
    }
  }

  // The unit's timeline (units out of range, in a hand-broken list, get one of their own).
  UnitTimeline& timeline(int unit) { return timelines_[unit]; }

  // Every wait depends on exactly one start of the same unit and micro-batch, comes after it, and
  // every start is waited for once (the pairs are the table's). A start is pending on its unit's
  // timeline until its wait takes it.
  void pairs() {
    for (int i = 0; i < n_; ++i) {
      const OpKindInfo& info = op_kind_info(at(i).kind);
      if (info.sync == OpSync::kStart) timeline(at(i).unit).pending(at(i).kind).push_back(i);
      if (info.sync != OpSync::kWait) continue;
      const OpKind start_kind = info.pair;
      std::vector<int> starts;
      for (int d : at(i).deps) {
        const ScheduleOp& o = at(d);
        if (o.kind == start_kind && o.unit == at(i).unit && o.bucket == at(i).bucket) starts.push_back(d);
      }
      // A carried wait completes what the previous run of the list started: it has no start in
      // the list, and only the list's first step may hold one.
      if (at(i).carried) {
        if (!starts.empty()) problem("{} is carried from the previous step yet depends on a start in the list", op(i));
        if (at(i).step != 0) problem("{} is carried from a previous run of the list but is not in its first step", op(i));
        continue;
      }
      if (starts.size() != 1) {
        problem("{} must depend on exactly one {} of the same unit; it depends on {}", op(i), op_kind_name(start_kind),
                starts.size());
        continue;
      }
      const ScheduleOp& start = at(starts[0]);
      // A start and its wait share the micro-batch, or the wait is in the next step (the boundary
      // overlapped into the next forward) or at the boundary (a replica reduction started in the
      // last micro-batch).
      const bool same_place = start.micro == at(i).micro && start.step == at(i).step;
      const bool next_step = start_kind == OpKind::kGatherUpdatedStart && at(i).step == start.step + 1;
      const bool at_boundary = start.step == at(i).step && at(i).micro < 0;
      if (!same_place && !next_step && !at_boundary) {
        problem("{} waits for {}, which is in another micro-batch or step", op(i), op(starts[0]));
      }
      std::vector<int>& pending = timeline(at(i).unit).pending(start_kind);
      const auto it = std::find(pending.begin(), pending.end(), starts[0]);
      if (it == pending.end()) {
        problem("{} waits again for {}, already waited for", op(i), op(starts[0]));
      } else {
        pending.erase(it);
      }
      if (start.source != at(i).source) problem("{} waits for {}, which gathers from another source", op(i), op(starts[0]));
    }
    for (auto& [unit, t] : timelines_) {
      for (OpKind kind : kAllOpKinds) {
        for (int i : t.pending(kind)) {
          // A carried start is waited for by the next run of the list; only its last step may hold one.
          if (at(i).carried && at(i).step == s_.ops.back().step) continue;
          problem("{} is never waited for", op(i));
        }
      }
    }
  }

  struct State {
    int writer = -1;
    After after = After::kValid;
    std::vector<int> readers;
  };

  void data_flow() {
    std::map<std::pair<Resource, int>, State> states;
    int last_invalidation = -1;
    for (int i = 0; i < n_; ++i) {
      const std::vector<Access> list = op_accesses(s_, at(i));
      for (const Access& a : list) {
        if (!a.read) continue;
        State& st = states[{a.resource, a.unit}];
        const std::string what = resource_name(s_, a.resource, a.unit);
        if (st.writer < 0) {
          if (is_transient(a.resource)) problem("{} reads {}, which no earlier op produced", op(i), what);
        } else if (st.writer != i) {
          if (!before(st.writer, i)) {
            problem("{} reads {} without depending on {}, which writes it", op(i), what, op(st.writer));
          } else if (st.after == After::kInFlight) {
            problem("{} reads {} while {} is still gathering it (depend on its wait)", op(i), what, op(st.writer));
          } else if (st.after == After::kReleased || st.after == After::kFreed) {
            problem("{} reads {} after {} {} it", op(i), what, op(st.writer),
                    st.after == After::kReleased ? "released" : "freed");
          }
          if (a.resource == Resource::kSecondary && last_invalidation > st.writer) {
            problem("{} uses a stale secondary copy: {} made it before the weights changed at {}", op(i), op(st.writer),
                    op(last_invalidation));
          }
        }
        st.readers.push_back(i);
      }
      for (const Access& a : list) {
        if (!a.write) continue;
        State& st = states[{a.resource, a.unit}];
        const std::string what = resource_name(s_, a.resource, a.unit);
        if (st.writer >= 0 && st.writer != i && !before(st.writer, i)) {
          problem("{} overwrites {} without depending on {}, which wrote it", op(i), what, op(st.writer));
        }
        for (int r : st.readers) {
          if (r != i && !before(r, i)) problem("{} overwrites {} without depending on {}, which reads it", op(i), what, op(r));
        }
        st.writer = i;
        st.after = a.after;
        st.readers.clear();
      }
      if (at(i).kind == OpKind::kInvalidateSecondaries) last_invalidation = i;
    }
  }

  // The list order is one execution: replayed through the units' state machine (the engine's), no
  // op finds its units in a state that refuses it. The first refusal is reported; the states
  // after it would only echo it.
  void lifecycle() {
    std::vector<UnitLifecycle> units = unit_lifecycles(s_);
    for (int i = 0; i < n_; ++i) {
      try {
        apply_op(s_, at(i), units);
      } catch (const Error& e) {
        problem("{} breaks the unit lifecycle: {}", op(i), e.what());
        return;
      }
    }
  }

  // Every buffer freed was allocated by an op whose kind may, and every one allocated is freed:
  // each unit's live buffers are on its timeline.
  void memory() {
    for (int i = 0; i < n_; ++i) {
      const OpKindInfo& info = op_kind_info(at(i).kind);
      for (const BufferEffect& b : at(i).alloc) {
        if (!info.allocates[static_cast<std::size_t>(b.kind)]) {
          problem("{} allocates a {} buffer, which a {} never does", op(i), buffer_kind_name(b.kind), info.name);
        }
      }
      for (const BufferEffect& b : at(i).free) {
        if (!info.frees[static_cast<std::size_t>(b.kind)]) {
          problem("{} frees a {} buffer, which a {} never does", op(i), buffer_kind_name(b.kind), info.name);
        }
      }
      for (const BufferEffect& b : at(i).alloc) {
        if (!timeline(b.unit).allocate(b)) {
          problem("{} allocates the {} buffer of unit {} while it is already allocated", op(i), buffer_kind_name(b.kind),
                  b.unit);
        }
      }
      for (const BufferEffect& b : at(i).free) {
        const std::string what = buffer_kind_name(b.kind);
        const std::optional<std::uint64_t> held = timeline(b.unit).free(b.kind);
        if (!held) {
          problem("{} frees the {} buffer of unit {}, which is not allocated", op(i), what, b.unit);
        } else if (*held != b.bytes) {
          problem("{} frees {} bytes of the {} buffer of unit {}, which has {}", op(i), b.bytes, what, b.unit, *held);
        }
      }
    }
    for (const auto& [unit, t] : timelines_) {
      for (std::size_t k = 0; k < static_cast<std::size_t>(BufferKind::kCount); ++k) {
        const auto kind = static_cast<BufferKind>(k);
        if (t.is_live(kind)) {
          problem("the {} buffer of unit {} ({} bytes) is never freed", buffer_kind_name(kind), unit, t.live(kind));
        }
      }
    }
  }

  const StepSchedule& s_;
  const int n_;
  bool order_ok_ = true;
  std::vector<std::vector<std::uint64_t>> anc_;
  ScheduleCheck out_;
  std::map<int, UnitTimeline> timelines_;
};

}  // namespace

ScheduleCheck validate_schedule(const StepSchedule& schedule) { return Validator(schedule).run(); }

void require_valid_schedule(const StepSchedule& schedule, std::string_view what) {
  const ScheduleCheck check = validate_schedule(schedule);
  if (check.ok()) return;
  std::string list;
  for (std::size_t i = 0; i < check.problems.size() && i < 5; ++i) list += "\n  " + check.problems[i];
  STRATA_CHECK(false, "the {} schedule is invalid ({} problems):{}", what, check.problems.size(), list);
}

}  // namespace strata
