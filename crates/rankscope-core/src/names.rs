//! Closed sets of names in the outputs, as enums: one place says each name, the JSON spells
//! it, and code matches on variants instead of comparing strings.

/// Declares a `Copy` enum whose variants serialize (and deserialize) as the given names, with
/// `as_str` and `Display` giving the same names.
#[macro_export]
macro_rules! named_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $var:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $var),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            /// The name the outputs use.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$var => $s),+
                }
            }
        }

        /// Compares with the name (what a reader of the JSON knows).
        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    named_enum! {
        /// A test set.
        enum Sample { One => "one", TwoWords => "two_words" }
    }

    #[test]
    fn names_round_trip() {
        for &v in Sample::ALL {
            let json = serde_json::to_string(&v).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            assert_eq!(serde_json::from_str::<Sample>(&json).ok(), Some(v));
            assert_eq!(v.to_string(), v.as_str());
        }
    }
}
