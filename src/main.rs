fn main() {
    std::process::exit(git_sandbox::cli::main());
}
