//! Command-line values shared by the tool and the benchmark program: flavours and schemes by
//! name, parsed into the engine's types with an error that lists the names accepted.

use ringslot_engine::{Flavour, Scheme};

/// A flavour by its name, for clap.
pub fn flavour(name: &str) -> Result<Flavour, String> {
    Flavour::from_name(name.as_bytes()).ok_or_else(|| {
        let names: Vec<&str> = Flavour::ALL.iter().map(|f| f.name()).collect();
        format!("unknown flavour `{name}` ({})", names.join(", "))
    })
}

/// A scheme beyond the rings, the slot table and modulo (which every run measures) by its
/// name, or `all` / `none`, for clap: the schemes it stands for.
pub fn other_schemes(name: &str) -> Result<Vec<Scheme>, String> {
    let others: Vec<Scheme> = Scheme::ALL
        .into_iter()
        .filter(|s| !Scheme::DEFAULT.contains(s))
        .collect();
    match name {
        "none" => Ok(Vec::new()),
        "all" => Ok(others),
        _ => match Scheme::from_name(name.as_bytes()) {
            Some(s) if others.contains(&s) => Ok(vec![s]),
            _ => {
                let names: Vec<&str> = others.iter().map(|s| s.name()).collect();
                Err(format!(
                    "unknown scheme `{name}` ({}, all or none)",
                    names.join(", ")
                ))
            }
        },
    }
}

/// The schemes of a `--schemes` list (each entry parsed by [`other_schemes`]), in order, once
/// each.
pub fn schemes_of(lists: &[Vec<Scheme>]) -> Vec<Scheme> {
    let mut out: Vec<Scheme> = Vec::new();
    for s in lists.iter().flatten() {
        if !out.contains(s) {
            out.push(*s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavours_and_schemes_parse_into_the_engines_types() {
        assert_eq!(flavour("KETAMA"), Ok(Flavour::Ketama));
        assert!(flavour("jump").unwrap_err().contains("native, ketama"));
        assert_eq!(other_schemes("none"), Ok(vec![]));
        assert_eq!(other_schemes("maglev"), Ok(vec![Scheme::Maglev]));
        assert_eq!(
            other_schemes("all"),
            Ok(vec![
                Scheme::Jump,
                Scheme::Rendezvous,
                Scheme::Maglev,
                Scheme::MultiProbe,
                Scheme::Bounded
            ])
        );
        assert!(other_schemes("ring").is_err(), "measured anyway");
        assert_eq!(
            schemes_of(&[vec![Scheme::Jump], vec![Scheme::Jump, Scheme::Maglev]]),
            vec![Scheme::Jump, Scheme::Maglev]
        );
    }
}
