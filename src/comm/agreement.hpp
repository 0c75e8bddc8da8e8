// How ranks agree on the outcome of local work before they go on, over the communicator (so the
// meter counts it): whether any rank failed, which failed first, and the one "agree on failure,
// then exit" step every caller uses, so no rank is left waiting in a collective its peers skip;
// and whether the ranks run the same settings (a digest compared, rank 0's text shared).
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.hpp"

namespace strata {

struct Failures {
  int first = -1;  // the lowest failing rank (-1: none)
  int count = 0;
};

// Collective over every rank of `comm`: one control reduction when no rank failed, two otherwise.
Failures agree_on_failures(Communicator& comm, bool failed);
// Collective: true on every rank when `flag` is set on any.
bool any_rank(Communicator& comm, bool flag);

// Collective: whether every rank passed the same value.
bool all_equal(Communicator& comm, std::uint64_t value);
// Collective: rank 0's text on every rank.
std::string text_of_rank0(Communicator& comm, const std::string& text);

// Collective. When any rank has a problem (a non-empty sentence), the first failing rank prints
// "strata: error[ (who)]: problem" to stderr and every rank throws AgreedExit{code}; with none,
// returns. `who` says which ranks failed when there are several ranks.
void exit_if_any_failed(Communicator& comm, const std::string& problem, int code);

}  // namespace strata
