// The `vit` binary against what real folders and terminals do: names that are not UTF-8, FIFOs, full
// disks, closed pipes, interrupted runs, outputs that must not be overwritten, too many threads; the
// command line's messages; and --stdin streaming its results as paths arrive.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cli_util.h"
#include "engine/io/safetensors.h"

namespace vit::test {
namespace {

const std::string kPython = "/usr/bin/python3";

TEST_F(Cli, NonUtf8NamesAreWrittenLosslessly) {
  const std::string bad = images_.file(std::string("bad\xff\xfe\x01name.jpg"));
  std::filesystem::copy_file(images_.file("a.jpg"), bad);
  TempDir out;
  const Result r = run_vit("classify " + model() + " --json --save-logits " + out.file("l.safetensors") + " " +
                           images_.path());
  EXPECT_EQ(r.code, 1) << r.err;  // d_broken.jpg
  write_file(out.file("lines"), r.out);
  // Python's json reads every line, and os.fsencode gives the exact bytes of the name back.
  const std::string check = kPython + " -c \"import json,os,sys; names=[os.fsencode(json.loads(l)['file']) for l in "
                                      "open(sys.argv[1], encoding='utf-8')]; print(repr(names))\" " + out.file("lines");
  FILE* p = ::popen(check.c_str(), "r");
  ASSERT_TRUE(p);
  char buf[4096] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
  ASSERT_EQ(::pclose(p), 0);
  const std::string names(buf, n);
  EXPECT_NE(names.find("bad\\xff\\xfe\\x01name.jpg"), std::string::npos) << names;
  EXPECT_EQ(std::count(names.begin(), names.end(), ','), 4) << names;  // 5 files, all listed
  SafeTensors st(out.file("l.safetensors"));
  EXPECT_EQ(st.get("logits").shape[0], 4);
  // Text output shows the bytes escaped, never raw control characters.
  const Result t = run_vit("classify " + model() + " '" + bad + "'");
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("bad\\xff\\xfe\\x01name.jpg"), std::string::npos) << t.out;
}

TEST_F(Cli, FifosAreErrorsNotHangs) {
  ASSERT_EQ(::mkfifo(images_.file("b2.jpg").c_str(), 0600), 0);
  Result r = run_vit("classify " + model() + " --json " + images_.path());  // no writer: would block forever
  EXPECT_EQ(r.code, 1);
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_EQ(lines[2]["error"], "is a FIFO (named pipe), not a regular file: not read");
  r = run_vit("classify " + model() + " " + images_.file("b2.jpg") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("b2.jpg: is a FIFO"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("a.jpg"), std::string::npos);
  ASSERT_EQ(::mkfifo(model_.file("fifo.safetensors").c_str(), 0600), 0);
  r = run_vit("classify --model " + model_.file("fifo.safetensors") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("fifo.safetensors: is a FIFO"), std::string::npos) << r.err;
  // A labels file or a config.json that is a FIFO: refused by name at load, never waited on.
  TempDir fifos;
  ASSERT_EQ(::mkfifo(fifos.file("labels.txt").c_str(), 0600), 0);
  r = run_vit("classify " + model() + " --labels " + fifos.file("labels.txt") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("labels.txt: is a FIFO"), std::string::npos) << r.err;
  ASSERT_EQ(::mkfifo(fifos.file("config.json").c_str(), 0600), 0);
  r = run_vit("classify " + model() + " --config " + fifos.file("config.json") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("config.json: is a FIFO"), std::string::npos) << r.err;
  ASSERT_EQ(::mkfifo(fifos.file("labels.csv").c_str(), 0600), 0);
  r = run_vit("eval " + model() + " --labels-csv " + fifos.file("labels.csv") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("labels.csv: is a FIFO"), std::string::npos) << r.err;
}

TEST_F(Cli, FullDiskOnStdoutIsExit3WithAMessage) {
  TempDir t;
  const int status = std::system((std::string(VIT_BINARY) + " classify " + model() + " " + images_.file("a.jpg") +
                                  " >/dev/full 2>" + t.file("err")).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_NE(read_file(t.file("err")).find("error: stdout: write failed: No space left on device"), std::string::npos)
      << read_file(t.file("err"));
}

TEST_F(Cli, ClosedPipeEndsQuietlyAndLeavesNoPartialOutput) {
  TempDir out;
  // More output than a pipe holds (64 KiB), so the run must meet the closed pipe however fast it is.
  std::string many;
  for (int i = 0; i < 400; ++i) many += " " + images_.file("a.jpg");
  const std::string cmd = std::string(VIT_BINARY) + " classify " + model() + " --batch 2 --save-logits " +
                          out.file("l.safetensors") + many + " 2>" + out.file("err") + " | head -1 >/dev/null";
  ASSERT_EQ(std::system(("bash -c '" + cmd + "'").c_str()), 0);
  EXPECT_EQ(read_file(out.file("err")), "");  // no message, as with cat
  EXPECT_FALSE(std::filesystem::exists(out.file("l.safetensors")));  // no torn file ...
  for (const auto& e : std::filesystem::directory_iterator(out.path()))  // ... and no temporary left
    EXPECT_EQ(e.path().filename(), "err");
}

TEST_F(Cli, InterruptedRunKeepsTheOldLogitsFile) {
  TempDir out;
  const std::string target = out.file("l.safetensors");
  ASSERT_EQ(run_vit("classify " + model() + " --save-logits " + target + " " + images_.file("a.jpg")).code, 0);
  const std::string before = read_file(target);
  // SIGINT once the run is under way (its first result line is out), while it waits for more paths on
  // stdin: the run cannot finish first, however fast the machine.
  TempDir fifo;
  ASSERT_EQ(::mkfifo(fifo.file("in").c_str(), 0600), 0);
  const std::string cmd = std::string(VIT_BINARY) + " classify " + model() + " --stdin --batch 1 --save-logits " +
                          target + " < " + fifo.file("in") + " > " + out.file("o") + " & pid=$!; exec 3> " +
                          fifo.file("in") + "; echo " + images_.file("a.jpg") + " >&3; for i in $(seq 300); do [ -s " +
                          out.file("o") + " ] && break; sleep 0.1; done; kill -INT $pid; wait $pid; echo $? > " +
                          out.file("status") + "; exec 3>&-";
  ASSERT_EQ(std::system(("bash -c '" + cmd + "'").c_str()), 0);
  EXPECT_EQ(read_file(out.file("status")), "130\n");  // ended by the signal
  EXPECT_TRUE(read_file(target) == before) << "the old file was not kept whole";
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(out.path())) files += e.path().filename().string()[0] == '.';
  EXPECT_EQ(files, 0u);  // no temporary left behind
}

TEST_F(Cli, TwoRunsWritingOneLogitsFileEachLeaveAWholeFile) {
  TempDir out;
  const std::string target = out.file("l.safetensors");
  const std::string run = std::string(VIT_BINARY) + " classify " + model() + " --batch 1 --save-logits " + target;
  const std::string cmd = run + " " + images_.file("a.jpg") + " " + images_.file("c.bmp") + " >/dev/null & " + run +
                          " " + images_.file("b.PNG") + " >/dev/null; wait";
  ASSERT_EQ(std::system(("bash -c '" + cmd + "'").c_str()), 0);
  SafeTensors st(target);  // one complete file: whichever run renamed last
  const int64_t rows = st.get("logits").shape[0];
  EXPECT_TRUE(rows == 1 || rows == 2) << rows;
  EXPECT_EQ(nlohmann::json::parse(st.metadata().at("files")).size(), size_t(rows));
}

TEST_F(Cli, LogitsFileMustNotOverwriteAnInputOrAStranger) {
  const std::string input = images_.file("a.jpg");
  const std::string before = read_file(input);
  Result r = run_vit("classify " + model() + " --save-logits " + input + " " + images_.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--save-logits " + input + ": is one of the inputs; not overwritten"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(input), before);
  write_file(model_.file("notes.txt"), "my notes");
  r = run_vit("classify " + model() + " --save-logits " + model_.file("notes.txt") + " " + input);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exists and is not a safetensors file; not overwritten (--force"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(model_.file("notes.txt")), "my notes");
  EXPECT_EQ(run_vit("classify " + model() + " --force --save-logits " + model_.file("notes.txt") + " " + input).code, 0);
  EXPECT_EQ(SafeTensors(model_.file("notes.txt")).get("logits").shape[0], 1);
}

TEST_F(Cli, TooManyThreadsWarnsAndUsesTheCores) {
  const Result r = run_vit("classify " + model() + " -t 1000 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 0) << r.err;
  const unsigned cores = std::thread::hardware_concurrency();
  EXPECT_NE(r.err.find("warning: 1000 threads asked for, but this machine has " + std::to_string(cores) +
                       " cores: using " + std::to_string(cores)),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, CommandLineAnswersLikeFamiliarTools) {
  Result r = run_vit("classify " + model() + " --topk three " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --topk: 'three' is not a number\nrun 'vit classify --help' for usage\n");
  r = run_vit("classify " + model() + " -k 0 " + images_.file("a.jpg"));
  EXPECT_EQ(r.err, "error: --topk: 0 is out of range (1 to 100000)\nrun 'vit classify --help' for usage\n");
  r = run_vit("clasify x.jpg");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'clasify' is not a vit command; did you mean 'classify'?"), std::string::npos) << r.err;
  r = run_vit("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("vit ", 0), 0u) << r.out;
  r = run_vit("classify --help");
  for (const char* shown : {"-k,--topk INT=5", "-b,--batch INT=8", "-m,--model", "-t,--threads INT=0",
                            "--max-pixels INT=100000000", "--precision NAME:{f32,bf16,int8}=f32"})
    EXPECT_NE(r.out.find(shown), std::string::npos) << shown << "\n" << r.out;
  // --every has no frame count by default (--fps samples): no "=0" that the flag itself would refuse.
  EXPECT_NE(r.out.find("--every INT "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--every INT="), std::string::npos) << r.out;
  // `vit help [COMMAND]`, as git, cargo and docker take it.
  EXPECT_EQ(run_vit("help classify").out, r.out);
  const Result help = run_vit("help"), flag = run_vit("--help");
  EXPECT_EQ(help.code, 0) << help.err;
  EXPECT_EQ(help.out, flag.out);
  EXPECT_NE(help.out.find("inspect"), std::string::npos) << help.out;
  r = run_vit("classify " + model() + " " + images_.file("a.jpg") + " -v");  // -v after the subcommand
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("debug: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\033["), std::string::npos);  // no colour when stderr is not a terminal
  write_file(model_.file("bom.txt"), "\xEF\xBB\xBFzero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n");
  r = run_vit("classify " + model() + " --json -k 10 --labels " + model_.file("bom.txt") + " " + images_.file("a.jpg"));
  EXPECT_NE(r.out.find("\"label\":\"zero\""), std::string::npos) << r.out;
}

TEST_F(Cli, BenchChecksItsOutputsFirstAndWritesCsvToStdout) {
  Result r = run_vit("bench " + model() + " --iters 1 --csv /nonexistent/dir/b.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");  // refused before any timing
  EXPECT_NE(r.err.find("/nonexistent/dir/b.csv: cannot create a file in its folder"), std::string::npos) << r.err;
  r = run_vit("bench " + model() + " --iters 1 --batch 1,2 --csv -");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("engine,model,precision,batch,", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3);
}

// The first batch's results come out while the stream is still open: a second path is written only
// after the first result line has been read.
TEST_F(Cli, StdinStreamsResultsAsPathsArrive) {
  TempDir t;
  ASSERT_EQ(::mkfifo(t.file("in").c_str(), 0600), 0);
  const std::string script =
      std::string(VIT_BINARY) + " classify " + model() + " --stdin --json < " + t.file("in") + " > " + t.file("out") +
      " & pid=$!; exec 3>" + t.file("in") + "; echo " + images_.file("a.jpg") + " >&3; first=no; " +
      "for i in $(seq 300); do if [ -s " + t.file("out") + " ]; then first=yes; break; fi; sleep 0.1; done; " +
      "echo $first > " + t.file("first") + "; echo " + images_.file("b.PNG") + " >&3; exec 3>&-; wait $pid";
  ASSERT_EQ(std::system(("bash -c '" + script + "'").c_str()), 0);
  EXPECT_EQ(read_file(t.file("first")), "yes\n");
  const auto lines = json_lines(read_file(t.file("out")));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["file"], images_.file("b.PNG"));
  // NUL-separated.
  const std::string nul = "printf '" + images_.file("a.jpg") + "\\0" + images_.file("d_broken.jpg") + "\\0' | " +
                          VIT_BINARY + " classify " + model() + " --stdin -0 --json > " + t.file("nul");
  EXPECT_EQ(WEXITSTATUS(std::system(("bash -c \"" + nul + "\"").c_str())), 1);
  const auto nl = json_lines(read_file(t.file("nul")));
  ASSERT_EQ(nl.size(), 2u);
  EXPECT_TRUE(nl[0].contains("top"));
  EXPECT_TRUE(nl[1].contains("error"));
}

// A list written on Windows: a UTF-8 byte order mark before the first name and CRLF line ends, neither
// part of a name. A BOM later in the stream is part of that name (a file may be named so).
TEST_F(Cli, StdinListWithByteOrderMarkAndCrlf) {
  TempDir t;
  write_file(t.file("list"), "\xEF\xBB\xBF" + images_.file("a.jpg") + "\r\n" + images_.file("b.PNG") + "\r\n\xEF\xBB\xBF" +
                                 images_.file("c.bmp") + "\r\n");
  const Result r = run_vit("classify " + model() + " --stdin --json < " + t.file("list"));
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0]["file"], images_.file("a.jpg"));
  EXPECT_TRUE(lines[0].contains("top")) << lines[0];
  EXPECT_TRUE(lines[1].contains("top")) << lines[1];
  EXPECT_EQ(lines[2]["file"], "\xEF\xBB\xBF" + images_.file("c.bmp"));
  EXPECT_EQ(lines[2]["error"], "cannot open: No such file or directory") << lines[2];
}

// The progress bar as a terminal shows it: each redraw (between carriage returns) fits in the
// terminal's width, so it never wraps; narrow terminals lose the bar before the counts; the bar is
// cleared, never left on the screen, and the results go to stdout whole.
TEST_F(Cli, ProgressBarFitsTheTerminal) {
  TempDir t;
  for (const int columns : {100, 40, 12}) {
    const std::string command = kPython + " " VIT_SOURCE_DIR "/tests/on_terminal.py " + std::to_string(columns) + " " +
                                t.file("out") + " " VIT_BINARY " classify " + model() + " -b 1 " + images_.path() +
                                " > " + t.file("tty");
    EXPECT_EQ(WEXITSTATUS(std::system(command.c_str())), 1);  // d_broken.jpg
    std::string tty = read_file(t.file("tty"));
    for (size_t at; (at = tty.find("\033[K")) != std::string::npos;) tty.erase(at, 3);
    size_t widest = 0, draws = 0;
    for (size_t begin = 0; begin < tty.size();) {
      const size_t end = std::min(tty.find_first_of("\r\n", begin), tty.size());
      const std::string segment = tty.substr(begin, end - begin);
      const bool other = segment.find("error") != std::string::npos || segment.find("classified") != std::string::npos;
      if (!segment.empty() && !other) {  // a redraw of the bar
        ++draws;
        widest = std::max(widest, segment.size());
      }
      begin = end + 1;
    }
    EXPECT_GT(draws, 0u) << columns << " columns: no progress drawn: " << tty;
    EXPECT_LT(widest, size_t(columns)) << columns << " columns: " << tty;
    EXPECT_EQ(tty.find("[#") != std::string::npos, columns >= 40) << columns << " columns: " << tty;
    // Cleared before the closing summary line, which starts on a clean line.
    const size_t summary = tty.find("3 of 4 images classified");
    ASSERT_NE(summary, std::string::npos) << tty;
    EXPECT_EQ(tty[summary - 1], '\r') << "the bar is left on the screen: " << tty;
    const std::string out = read_file(t.file("out"));
    for (const char* name : {"a.jpg", "b.PNG", "c.bmp"}) EXPECT_NE(out.find(name), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace vit::test
