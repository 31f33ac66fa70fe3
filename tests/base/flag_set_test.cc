#define BOOST_TEST_MODULE flag_set
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "base/flag_set.h"

namespace poolcoord::base {
namespace {

struct Options {
  std::string name = "x";
  bool on = false;
  int port = 80;
  int64_t size = 10;
  absl::Duration wait = absl::Seconds(90);
  absl::Duration period = absl::Seconds(5);
  std::vector<std::string> list = {"a", "b"};
  int verbosity = 0;
  bool help = false;
};

struct Parsed {
  Options o;
  absl::Status status;
};

FlagSet Flags(Options* o) {
  FlagSet f;
  f.String("name", &o->name, "A name.");
  f.Bool("on", &o->on, "A switch.");
  f.Int("port", &o->port, 1, 65535, "A port.");
  f.Int64("size", &o->size, 1, "A size.");
  f.Duration("wait", &o->wait, "A wait.");
  f.Duration("period", &o->period, "A period.", /*positive=*/true);
  f.StringList("list", &o->list, "A list.");
  f.Int("v", &o->verbosity, 0, 10, "Verbosity.");
  f.Bool("help", &o->help, "Help.");
  return f;
}

Parsed Parse(std::vector<std::string> args) {
  Parsed p;
  FlagSet f = Flags(&p.o);
  p.status = f.Parse(args);
  return p;
}

std::string Error(std::vector<std::string> args) {
  Parsed p = Parse(std::move(args));
  BOOST_TEST(p.status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(p.status.message());
}

BOOST_AUTO_TEST_CASE(EverySpellingSetsItsFlag) {
  Parsed p = Parse({"--name=y", "--on", "--port", "8443", "--size=1000", "--wait=1m30s",
                    "--period", "2s", "--list=c, d", "--list=e", "-v3"});
  BOOST_REQUIRE(p.status.ok());
  BOOST_TEST(p.o.name == "y");
  BOOST_TEST(p.o.on);
  BOOST_TEST(p.o.port == 8443);
  BOOST_TEST(p.o.size == 1000);
  BOOST_TEST((p.o.wait == absl::Seconds(90)));
  BOOST_TEST((p.o.period == absl::Seconds(2)));
  BOOST_TEST((p.o.list == std::vector<std::string>{"c", "d", "e"}));  // the first use replaces
  BOOST_TEST(p.o.verbosity == 3);
  BOOST_TEST(Parse({"-v", "4"}).o.verbosity == 4);
  BOOST_TEST(Parse({"-v=5"}).o.verbosity == 5);
  BOOST_TEST(Parse({"--on=false"}).o.on == false);
  BOOST_TEST(Parse({"-h"}).o.help);
  BOOST_TEST(Parse({"--wait=0s"}).status.ok());
  BOOST_TEST(Parse({"--port=1", "--"}).status.ok());
}

BOOST_AUTO_TEST_CASE(BadInputIsAnErrorNamingIt) {
  BOOST_TEST(Error({"--nope"}) == "unknown flag: --nope");
  BOOST_TEST(Error({"-x"}) == "unknown shorthand flag: 'x' in -x");
  BOOST_TEST(Error({"positional"}) == "unexpected argument \"positional\": this command takes flags only");
  BOOST_TEST(Error({"--", "positional"}) ==
             "unexpected argument \"positional\": this command takes flags only");
  BOOST_TEST(Error({"--port"}) == "flag needs an argument: --port");
  BOOST_TEST(Error({"--port=0"}) == "invalid argument \"0\" for \"--port\" flag: must be between 1 and 65535");
  BOOST_TEST(Error({"--size=0"}) == "invalid argument \"0\" for \"--size\" flag: must be at least 1");
  BOOST_TEST(Error({"--port=eighty"}) == "invalid argument \"eighty\" for \"--port\" flag: not an integer");
  BOOST_TEST(Error({"--on=maybe"}).find("not a boolean") != std::string::npos);
  BOOST_TEST(Error({"--wait=soon"}).find("not a duration") != std::string::npos);
  BOOST_TEST(Error({"--wait=-1s"}).find("must not be negative") != std::string::npos);
  BOOST_TEST(Error({"--period=0s"}).find("must be positive") != std::string::npos);
}

// With somewhere to put them, arguments that are not flags are kept in order,
// between flags too, and everything after "--" as it is (pflag's Args()).
BOOST_AUTO_TEST_CASE(PositionalArgumentsWhereTheCommandTakesThem) {
  Options o;
  FlagSet f = Flags(&o);
  std::vector<std::string> positional;
  BOOST_REQUIRE(f.Parse({"dir", "--port=8443", "keys.tsv", "-", "--", "--on", "x"}, &positional).ok());
  BOOST_TEST(positional == (std::vector<std::string>{"dir", "keys.tsv", "-", "--on", "x"}),
             boost::test_tools::per_element());
  BOOST_TEST(o.port == 8443);
  BOOST_TEST(!o.on);  // after "--": an argument, not the flag
  std::vector<std::string> none;
  BOOST_TEST(f.Parse({"--nope"}, &none).message() == "unknown flag: --nope");
}

// -vN was converted with std::stoi, unchecked: "-v99999999999" threw
// std::out_of_range and aborted poolcoord-apiserver and poolcoord-agent, and
// "-v99" was taken where "--v=99" is refused. It is --v's value now.
BOOST_AUTO_TEST_CASE(ShorthandVerbosityIsCheckedAsTheFlag) {
  BOOST_TEST(Error({"-v99999999999"}) ==
             "invalid argument \"99999999999\" for \"--v\" flag: must be between 0 and 10");
  BOOST_TEST(Error({"-v99999999999999999999"}) ==
             "invalid argument \"99999999999999999999\" for \"--v\" flag: not an integer");
  BOOST_TEST(Error({"-v99"}) == "invalid argument \"99\" for \"--v\" flag: must be between 0 and 10");
}

BOOST_AUTO_TEST_CASE(UsageShowsTypesAndDefaults) {
  Options o;
  o.name = "";
  // Every help starts in one column, past the longest head ("--period duration"),
  // as pflag aligns them: a head longer than the asked width pushed its own
  // help one space after it (a newcomer found two such rows in the server's).
  const std::string usage = Flags(&o).Usage(20);
  auto row = [](std::string head, const std::string& help) {
    head.resize(24, ' ');
    return head + " " + help + "\n";
  };
  BOOST_TEST(usage.find(row("      --name string", "A name.")) != std::string::npos);
  BOOST_TEST(usage.find(row("      --on", "A switch. (default false)")) != std::string::npos);
  BOOST_TEST(usage.find(row("      --port int", "A port. (default 80)")) != std::string::npos);
  BOOST_TEST(usage.find(row("      --wait duration", "A wait. (default 1m30s)")) != std::string::npos);
  BOOST_TEST(usage.find(row("      --list strings", "A list. (default [a,b])")) != std::string::npos);
  BOOST_TEST(usage.find(row("  -v, --v int", "Verbosity. (default 0)")) != std::string::npos);
  BOOST_TEST(usage.find(row("  -h, --help", "Help.")) != std::string::npos);
}

// poolcoord-sim's ratios and seconds (--partition-ratio=0.2, --duration=60):
// pflag's float64, so the simulator's --help lists them as the server's does.
BOOST_AUTO_TEST_CASE(DoublesParseAndShowTheirDefaults) {
  double ratio = 0.25, seconds = 60;
  FlagSet f;
  f.Double("ratio", &ratio, "A ratio.");
  f.Double("seconds", &seconds, "Seconds.");
  BOOST_TEST(f.Usage(10).find("      --ratio float    A ratio. (default 0.25)\n") != std::string::npos,
             f.Usage(10));
  BOOST_TEST(f.Usage(10).find("      --seconds float  Seconds. (default 60)\n") != std::string::npos,
             f.Usage(10));
  BOOST_REQUIRE(f.Parse({"--ratio=0.5", "--seconds", "1e3"}).ok());
  BOOST_TEST(ratio == 0.5);
  BOOST_TEST(seconds == 1000.0);
  BOOST_TEST(f.Parse({"--ratio=half"}).message() ==
             "invalid argument \"half\" for \"--ratio\" flag: not a number");
  BOOST_TEST(f.Parse({"--ratio=inf"}).message() ==
             "invalid argument \"inf\" for \"--ratio\" flag: not a number");
  BOOST_TEST(ratio == 0.5);
}

// poolcoord-sim's --server-arg: each use is one argument, commas kept.
BOOST_AUTO_TEST_CASE(StringArraysKeepEachValueWhole) {
  std::vector<std::string> args = {"default"};
  FlagSet f;
  f.StringArray("arg", &args, "An argument.");
  BOOST_TEST(f.Usage(10).find("      --arg stringArray  An argument. (default [default])\n") !=
                 std::string::npos,
             f.Usage(10));
  BOOST_REQUIRE(f.Parse({"--arg=--users=a,b", "--arg", "-v=2"}).ok());
  BOOST_TEST((args == std::vector<std::string>{"--users=a,b", "-v=2"}));
}

BOOST_AUTO_TEST_CASE(GoDurationAsTimeDurationString) {
  BOOST_TEST(GoDuration(absl::Seconds(0)) == "0s");
  BOOST_TEST(GoDuration(absl::Seconds(15)) == "15s");
  BOOST_TEST(GoDuration(absl::Minutes(5)) == "5m0s");
  BOOST_TEST(GoDuration(absl::Hours(1) + absl::Seconds(1)) == "1h0m1s");
}

}  // namespace
}  // namespace poolcoord::base
