fn main() {
    println!("teml {}", env!("CARGO_PKG_VERSION"));
}
