//! Host values: data and transformed data as flat row-major numbers with a shape.

/// A value known before sampling: a data item, a transformed-data item, or a constant.
///
/// `shape` lists array dimensions first, then the vector length or the matrix rows and
/// columns; a scalar has an empty shape. `values` holds the elements in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub shape: Vec<usize>,
    pub values: Values,
}

/// The elements of a [`Value`]: integers stay exact.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    Int(Vec<i64>),
    Real(Vec<f64>),
}

impl Value {
    pub fn int(value: i64) -> Value {
        Value {
            shape: Vec::new(),
            values: Values::Int(vec![value]),
        }
    }

    pub fn real(value: f64) -> Value {
        Value {
            shape: Vec::new(),
            values: Values::Real(vec![value]),
        }
    }

    pub fn is_int(&self) -> bool {
        matches!(self.values, Values::Int(_))
    }

    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    pub fn len(&self) -> usize {
        match &self.values {
            Values::Int(v) => v.len(),
            Values::Real(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as reals (integers converted).
    pub fn reals(&self) -> Vec<f64> {
        match &self.values {
            Values::Int(v) => v.iter().map(|&x| x as f64).collect(),
            Values::Real(v) => v.clone(),
        }
    }

    /// The element at flat position `i` as a real.
    pub fn real_at(&self, i: usize) -> f64 {
        match &self.values {
            Values::Int(v) => v[i] as f64,
            Values::Real(v) => v[i],
        }
    }

    /// The value of an integer scalar.
    pub fn as_int(&self) -> Option<i64> {
        match &self.values {
            Values::Int(v) if self.shape.is_empty() => v.first().copied(),
            _ => None,
        }
    }

    /// The value of a scalar, as a real.
    pub fn as_real(&self) -> Option<f64> {
        self.shape.is_empty().then(|| self.real_at(0))
    }
}
