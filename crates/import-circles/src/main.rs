//! `import-circles [CRATE_DIR...]`: prints every module import circle inside the given crates
//! (default: every crate under `crates/` and `bench/` of the current directory) and exits 1 if
//! there is one, 2 if a source file cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut dirs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        if let Ok(entries) = std::fs::read_dir("crates") {
            dirs.extend(entries.filter_map(|e| e.ok().map(|e| e.path())));
        }
        dirs.push(PathBuf::from("bench"));
        dirs.retain(|d| d.join("Cargo.toml").exists());
        dirs.sort();
    }
    let (mut crates, mut modules, mut circles) = (0, 0, 0);
    for dir in &dirs {
        let reports = match ferrometal_import_circles::check_crate(dir) {
            Ok(reports) => reports,
            Err(e) => {
                eprintln!("import-circles: {}", e.0);
                return ExitCode::from(2);
            }
        };
        crates += 1;
        for report in reports {
            modules += report.modules;
            for circle in &report.circles {
                circles += 1;
                print!("{}: {circle}", report.root.display());
            }
        }
    }
    println!("import-circles: {crates} crates, {modules} modules, {circles} circles");
    if circles == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
