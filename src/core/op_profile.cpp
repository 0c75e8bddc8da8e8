// The process-wide operation profile.
#include "core/op_profile.hpp"

namespace strata {

OpProfile& OpProfile::global() {
  static OpProfile profile;
  return profile;
}

}  // namespace strata
