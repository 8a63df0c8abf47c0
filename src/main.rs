fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(teml::runtime::WORKER_ARG) {
        std::process::exit(teml::runtime::worker_main(&args[2..]));
    }
    println!("teml {}", env!("CARGO_PKG_VERSION"));
}
