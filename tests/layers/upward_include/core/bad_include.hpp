// Fixture for the layer check: a core header that includes an engine header, which the check
// must refuse.
#pragma once
#include "engine/sharded_engine.hpp"
