# Driver for R's ks (and KernSmooth) used by benchmarks/ks_oracle.py and tests/unit/test_ks_oracle.py.
#
#   Rscript ks_oracle.R JOBS
#
# JOBS holds one job a line, fields separated by spaces: "id op data [args...]". data is a file of
# raw little-endian float64 values (exact round trip, unlike decimal text), n rows by d columns in row
# order; d is the job's first argument. Every result is printed as a line "id key value..." (values with
# 17 significant digits); R warnings come back as "id warning <message>" and errors as "id error
# <message>", so one failing job does not stop the others. Times are proc.time() elapsed seconds around
# the ks call alone (not R's start-up or the data loading).
#
# Ops (the LSCV "pieces" at H are lscv1 = Qr(X, 2H, inc = 1) and lscv2 = Qr(X, H, inc = 0), ks's own
# double sums: n^-2 sum_{i,j} K_2H(Xi - Xj) and (n(n-1))^-1 sum_{i!=j} K_H(Xi - Xj); ks's criterion is
# lscv1 - 2 lscv2, pg_kde's (eq. 24/32, normaliser n^2) is lscv1 - 2 lscv2 (n-1)/n):
#   Hlscv     d          ks::Hlscv(x, binned = FALSE): H (d*d, column order), seconds, value, lscv1, lscv2
#   Hlscv_from d H...    ks::Hlscv(x, Hstart = H, binned = FALSE): H, seconds, value
#   Hlscv_tight d        Nelder-Mead restarted from ks::Hlscv's answer with reltol 1e-15 on ks's own
#                        criterion, then on pg_kde's: H_ks_tight, value_ks_tight, H_n2_tight, value_n2_tight
#   hlscv     1          ks::hlscv(x, binned = FALSE, bw.ucv = FALSE): h, seconds, lscv1, lscv2
#   hlscv_ucv 1          ks::hlscv(x, binned = FALSE) (bw.ucv = TRUE: stats::bw.ucv): h, seconds
#   hlscv_n2  1          hlscv's own search (optimise, tol = machine epsilon, same interval) on pg_kde's
#                        normalisation of the same criterion: h
#   hpi       1          ks::hpi(x): h, seconds
#   dpik      1 G        KernSmooth::dpik(x, gridsize = G, truncate = FALSE): h
#   pieces    d H...     lscv1, lscv2 and ks:::lscv.mat (value) at the given H (d*d values)

suppressPackageStartupMessages(library(ks))

out <- function(id, key, values) {
  if (is.numeric(values)) values <- sprintf("%.17g", values)
  cat(id, key, paste(values, collapse = " "), "\n")
}

load_data <- function(path, d) {
  n <- file.size(path) / 8 / d
  matrix(readBin(path, "double", n = n * d, size = 8, endian = "little"), ncol = d, byrow = TRUE)
}

timed <- function(expr) {
  start <- proc.time()[["elapsed"]]
  value <- force(expr)
  list(value = value, seconds = proc.time()[["elapsed"]] - start)
}

pieces <- function(x, H) {
  c(lscv1 = ks:::Qr(x = x, Sigma = 2 * H, inc = 1), lscv2 = ks:::Qr(x = x, Sigma = H, inc = 0))
}

put_pieces <- function(id, x, H) {
  p <- pieces(x, H)
  out(id, "lscv1", p[["lscv1"]])
  out(id, "lscv2", p[["lscv2"]])
}

# ks::Hlscv's Nelder-Mead (over vech of H^(1/2), with its determinant guard) restarted from H0 with a
# tight tolerance, on ks's criterion (n2 = FALSE) or on pg_kde's normalisation of it (n2 = TRUE).
tight <- function(x, H0, n2) {
  n <- nrow(x)
  Hnorm <- ks:::Hns(x = x)
  crit <- function(H) {
    p <- pieces(x, H)
    p[["lscv1"]] - 2 * p[["lscv2"]] * (if (n2) (n - 1) / n else 1)
  }
  init <- crit(Hnorm)
  f <- function(vechH) {
    H <- invvech(vechH) %*% invvech(vechH)
    v <- crit(H)
    if (det(H) < 1e-10 * det(Hnorm) || det(H) > 1e10 * det(Hnorm) || abs(v) > 1e10 * abs(init)) v <- init
    v
  }
  best <- vech(matrix.sqrt(H0))
  for (round in 1:3) {  # restarts: Nelder-Mead's simplex collapses before reltol is met
    r <- optim(best, f, method = "Nelder-Mead", control = list(reltol = 1e-15, maxit = 20000))
    best <- r$par
  }
  list(H = invvech(best) %*% invvech(best), value = r$value)
}

run_job <- function(fields) {
  id <- fields[1]; op <- fields[2]; path <- fields[3]; d <- as.integer(fields[4])
  args <- as.numeric(fields[-(1:4)])
  x <- load_data(path, d)
  if (op == "Hlscv") {
    r <- timed(Hlscv(x, binned = FALSE))
    out(id, "H", as.vector(r$value)); out(id, "seconds", r$seconds)
    out(id, "value", ks:::lscv.mat(x = x, H = r$value))
    put_pieces(id, x, r$value)
  } else if (op == "Hlscv_from") {
    r <- timed(Hlscv(x, Hstart = matrix(args, d, d), binned = FALSE))
    out(id, "H", as.vector(r$value)); out(id, "seconds", r$seconds)
    out(id, "value", ks:::lscv.mat(x = x, H = r$value))
  } else if (op == "Hlscv_tight") {
    H0 <- suppressWarnings(Hlscv(x, binned = FALSE))
    a <- tight(x, H0, FALSE); b <- tight(x, H0, TRUE)
    out(id, "H_ks_tight", as.vector(a$H)); out(id, "value_ks_tight", a$value)
    out(id, "H_n2_tight", as.vector(b$H)); out(id, "value_n2_tight", b$value)
  } else if (op == "hlscv") {
    r <- timed(hlscv(x[, 1], binned = FALSE, bw.ucv = FALSE))
    out(id, "h", r$value); out(id, "seconds", r$seconds)
    put_pieces(id, x, matrix(r$value^2))
  } else if (op == "hlscv_ucv") {
    r <- timed(hlscv(x[, 1], binned = FALSE))
    out(id, "h", r$value); out(id, "seconds", r$seconds)
  } else if (op == "hlscv_n2") {
    # hlscv's unbinned criterion and search, with the leave-one-out normaliser n(n-1) of its K_h term
    # set to n^2. Unlike hlscv it computes exp(-d^2/(4h^2)) directly: hlscv raises exp(-d^2/2) to the
    # power 1/(2h^2), and exp(-d^2/2) underflows to 0 for |d| > 38.6 whatever h is, which drops pairs
    # that still count when h is several units (data in minutes or miles).
    v <- x[, 1]; n <- length(v)
    difs <- outer(v, v, "-"); difs <- difs[lower.tri(difs)]
    hnorm <- sqrt((4 / (n * 3))^(2 / 5) * var(v))
    sq <- difs^2
    f <- function(h) {
      1 / (2 * sqrt(pi) * n * h) + 2 / n^2 * (sum(exp(-sq / (4 * h^2))) / (2 * sqrt(pi) * h) -
                                              2 * sum(exp(-sq / (2 * h^2))) / (sqrt(2 * pi) * h))
    }
    r <- optimise(f, interval = c(min(difs[difs > 0]), 2 * hnorm), tol = .Machine$double.eps)
    out(id, "h", r$minimum)
  } else if (op == "hpi") {
    r <- timed(hpi(x[, 1]))
    out(id, "h", r$value); out(id, "seconds", r$seconds)
  } else if (op == "dpik") {
    out(id, "h", KernSmooth::dpik(x[, 1], gridsize = as.integer(args[1]), truncate = FALSE))
  } else if (op == "pieces") {
    H <- matrix(args, d, d)
    put_pieces(id, x, H)
    out(id, "value", ks:::lscv.mat(x = x, H = H))
  } else {
    stop("unknown op ", op)
  }
}

args <- commandArgs(trailingOnly = TRUE)
if (length(args) >= 1 && args[1] == "--faithful") {
  # The built-in data set: n rows of (eruptions, waiting) as raw float64, row order.
  writeBin(as.vector(t(as.matrix(datasets::faithful))), args[2], size = 8, endian = "little")
  quit(save = "no")
}
for (line in readLines(args[1])) {
  fields <- strsplit(trimws(line), " +")[[1]]
  if (length(fields) < 4) next
  id <- fields[1]
  withCallingHandlers(
    tryCatch(run_job(fields), error = function(e) out(id, "error", gsub("\n", " ", conditionMessage(e)))),
    warning = function(w) {
      out(id, "warning", gsub("\n", " ", conditionMessage(w)))
      invokeRestart("muffleWarning")
    }
  )
}
