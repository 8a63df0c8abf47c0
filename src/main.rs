use clap::Parser;
use teml::cli::{Cli, Command};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(teml::runtime::WORKER_ARG) {
        std::process::exit(teml::runtime::worker_main(&args[2..]));
    }
    let cli = Cli::parse();
    // A malformed TEML_MACHINE would otherwise be ignored by every command that does not plan.
    if let Err(e) = teml::runtime::machine::check_pinned() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    let code = match &cli.command {
        Command::Run(a) => teml::cli::run(a),
        Command::Check(a) => teml::cli::check(a),
        Command::Bench(a) => teml::cli::bench(a),
        Command::Tune(a) => teml::cli::tune(a),
        Command::Auto(a) => teml::cli::auto(a),
        Command::Job(a) => teml::cli::job(a),
        Command::Export(a) => teml::cli::export(a),
        Command::CliReference => {
            print!("{}", teml::cli::cli_reference());
            0
        }
        Command::Builtins => {
            print!("{}", teml::cli::reference());
            0
        }
        Command::Repl(a) => {
            let state =
                teml::ir::State::starting(a.define.iter().map(|(n, v)| (n.as_str(), *v)), a.unchecked);
            let mode = if a.rhai { teml::repl::Mode::Rhai } else { teml::repl::Mode::Teml };
            let mut repl = teml::repl::Repl::new(state, mode);
            if let Some(f) = &a.file {
                match repl.load_file(f, &[], &format!(":load {}", f.display())) {
                    Ok(msg) => println!("{msg}"),
                    Err(e) => eprintln!("{e}"),
                }
            }
            repl.run()
        }
    };
    std::process::exit(code);
}
