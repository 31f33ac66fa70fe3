#define BOOST_TEST_MODULE status_macros
#include <boost/test/unit_test.hpp>

#include "absl/status/statusor.h"
#include "base/status_macros.h"

namespace poolcoord::base {
namespace {

absl::Status Check(bool ok) { return ok ? absl::OkStatus() : absl::InvalidArgumentError("bad"); }
absl::StatusOr<int> Number(bool ok) {
  if (!ok) return absl::NotFoundError("none");
  return 7;
}
int calls = 0;
absl::Status Counted() {
  ++calls;
  return absl::OkStatus();
}

absl::Status UseReturnIfError(bool ok) {
  RETURN_IF_ERROR(Check(ok));
  RETURN_IF_ERROR(Counted());
  return absl::OkStatus();
}

absl::StatusOr<int> UseAssignOrReturn(bool ok) {
  ASSIGN_OR_RETURN(int n, Number(ok));
  ASSIGN_OR_RETURN(const int m, Number(true));
  return n + m;
}

BOOST_AUTO_TEST_CASE(StatusMacros) {
  calls = 0;
  BOOST_TEST(absl::IsInvalidArgument(UseReturnIfError(false)));
  BOOST_TEST(calls == 0);
  BOOST_TEST(UseReturnIfError(true).ok());
  BOOST_TEST(calls == 1);  // evaluated once
  BOOST_TEST(absl::IsNotFound(UseAssignOrReturn(false).status()));
  BOOST_TEST(*UseAssignOrReturn(true) == 14);
}

}  // namespace
}  // namespace poolcoord::base
