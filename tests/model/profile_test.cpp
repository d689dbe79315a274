#include <catch2/catch.hpp>

#include "model/profile.h"

TEST_CASE("placeholder model") { REQUIRE(true); }
