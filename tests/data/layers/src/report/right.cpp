// Pointing down is allowed: the report layer reads the engine's results.
#include "accumbench/engine.hpp"
#include "accumbench/report.hpp"
