// A deliberately wrong include for the layer check's own test (tests/layers/check_layers.py): the
// engine prints nothing, so it has no business with the report layer.
#include "accumbench/engine.hpp"
#include "accumbench/report.hpp"
