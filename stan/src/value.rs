//! Host values: data, transformed data and generated quantities as flat row-major numbers with
//! a shape, and [`Typed`] values that also know their Stan element type.

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

    /// The same shape with real elements.
    pub fn to_real(&self) -> Value {
        Value {
            shape: self.shape.clone(),
            values: Values::Real(self.reals()),
        }
    }
}

/// The innermost type of a value: what its array dimensions (if any) hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `int` or `real` (the [`Values`] variant tells which).
    Scalar,
    Vector,
    RowVector,
    Matrix,
}

impl Elem {
    /// How many of the innermost dimensions of the shape belong to the element.
    pub fn rank(self) -> usize {
        match self {
            Elem::Scalar => 0,
            Elem::Vector | Elem::RowVector => 1,
            Elem::Matrix => 2,
        }
    }

    /// The element type a shape suggests when nothing else is known: one dimension is a
    /// vector, two a matrix, more an array of matrices.
    pub fn guess(shape: &[usize], int: bool) -> Elem {
        match (shape.len(), int) {
            (0, _) | (_, true) => Elem::Scalar,
            (1, _) => Elem::Vector,
            _ => Elem::Matrix,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Elem::Scalar => "scalar",
            Elem::Vector => "vector",
            Elem::RowVector => "row_vector",
            Elem::Matrix => "matrix",
        }
    }
}

/// A value with its Stan type: `array[N] vector[K]` is shape `[N, K]` with element `Vector`.
#[derive(Debug, Clone, PartialEq)]
pub struct Typed {
    pub value: Value,
    pub elem: Elem,
}

impl Typed {
    pub fn new(value: Value, elem: Elem) -> Typed {
        Typed { value, elem }
    }

    /// A value whose element type is guessed from its shape ([`Elem::guess`]).
    pub fn guess(value: Value) -> Typed {
        let elem = Elem::guess(&value.shape, value.is_int());
        Typed { value, elem }
    }

    pub fn int(x: i64) -> Typed {
        Typed::new(Value::int(x), Elem::Scalar)
    }

    pub fn real(x: f64) -> Typed {
        Typed::new(Value::real(x), Elem::Scalar)
    }

    /// A real vector (or row vector) of `values`.
    pub fn vector(values: Vec<f64>, elem: Elem) -> Typed {
        Typed::new(
            Value {
                shape: vec![values.len()],
                values: Values::Real(values),
            },
            elem,
        )
    }

    /// A real matrix, row-major.
    pub fn matrix(rows: usize, cols: usize, values: Vec<f64>) -> Typed {
        Typed::new(
            Value {
                shape: vec![rows, cols],
                values: Values::Real(values),
            },
            Elem::Matrix,
        )
    }

    /// A real array of scalars with `shape`.
    pub fn real_array(shape: Vec<usize>, values: Vec<f64>) -> Typed {
        Typed::new(
            Value {
                shape,
                values: Values::Real(values),
            },
            Elem::Scalar,
        )
    }

    /// Number of array dimensions.
    pub fn array_rank(&self) -> usize {
        self.value.shape.len().saturating_sub(self.elem.rank())
    }

    pub fn shape(&self) -> &[usize] {
        &self.value.shape
    }

    pub fn is_int(&self) -> bool {
        self.value.is_int()
    }

    pub fn is_scalar(&self) -> bool {
        self.value.is_scalar()
    }

    pub fn len(&self) -> usize {
        self.value.len()
    }

    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    pub fn reals(&self) -> Vec<f64> {
        self.value.reals()
    }

    pub fn real_at(&self, i: usize) -> f64 {
        self.value.real_at(i)
    }

    /// A description for messages: `int`, `real`, `vector[3]`, `array[2] matrix[3,3]`.
    pub fn describe(&self) -> String {
        let shape = &self.value.shape;
        let split = self.array_rank().min(shape.len());
        let (dims, inner) = shape.split_at(split);
        let base = match self.elem {
            Elem::Scalar if self.is_int() => "int".to_owned(),
            Elem::Scalar => "real".to_owned(),
            elem => format!(
                "{}[{}]",
                elem.as_str(),
                inner
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        if dims.is_empty() {
            base
        } else {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("array[{}] {base}", dims.join(","))
        }
    }
}
