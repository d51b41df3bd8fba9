/*
 * report.c — table, JSON and SVG outputs of fco-sim (see report.h). Output carries no date
 * and only file base names, so a run is reproducible byte for byte (tests compare it).
 */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char* base_name(const char* path) {
  const char* s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static const char* batch_label(int model) {
  return model == SIM_MODEL_DLRM ? "batch/GPU" : model == SIM_MODEL_DECODE ? "tokens" : "tok/GPU";
}

static void print_list(FILE* f, const double* x, int n) {
  for (int i = 0; i < n; i++) fprintf(f, "%s%g", i ? "-" : "", x[i]);
}

static void print_config(FILE* f, const sim_report_t* r) {
  const sim_config_t* c = r->cfg;
  fprintf(f, "# config %s: %s, ", base_name(c->path), c->name);
  const char* dt = c->dtype_bytes == 4 ? "fp32" : c->dtype_bytes == 2 ? "16-bit" : "8-bit";
  if (r->model == SIM_MODEL_DLRM) {
    double lookups = 0;
    for (int i = 0; i < c->num_tables; i++) lookups += c->pooling[i];
    fprintf(f, "%d tables (%g lookups/sample), D %g, bottom %g-", c->num_tables, lookups,
            c->emb_dim, c->dense_features);
    print_list(f, c->bottom, c->num_bottom);
    fprintf(f, ", top ");
    print_list(f, c->top, c->num_top);
    if (c->interaction == SIM_INTER_DCN)
      fprintf(f, ", DCN %g x rank %g", c->dcn_layers, c->dcn_low_rank);
    else
      fprintf(f, ", dot interaction");
    fprintf(f, ", %s, %s sharding\n", dt, sim_sharding_name(c->sharding));
    if (r->strong)
      fprintf(f, "# scaling: strong (global batch %g fixed)\n", c->global_batch);
    else
      fprintf(f, "# scaling: weak (batch per GPU fixed)\n");
  } else if (r->model == SIM_MODEL_DECODE) {
    fprintf(f, "hidden %g, ffn %g%s, %g layers, %g heads (%g KV) x %g, context %g, vocab %g, %s\n",
            c->hidden, c->ffn, c->gated ? " (gated)" : "", c->layers, c->heads, c->kv_heads,
            c->head_dim, c->context, c->vocab, dt);
  } else {
    fprintf(f, "hidden %g, expert ffn %g%s, %g experts, top-%g, zipf %g, %s\n", c->hidden,
            c->expert_ffn, c->gated ? " (gated)" : "", c->experts, c->top_k, c->zipf, dt);
  }
}

void sim_print_header(FILE* f, const sim_report_t* r) {
  static const char* const kWhat[SIM_MODEL_NUM] = {
      "one DLRM training iteration; fused = embedding+All-to-All (fco)",
      "one tensor-parallel decode step; fused = GEMV+AllReduce (fco)",
      "one MoE layer forward; fused = GEMM+All-to-All combine (fco)"};
  const sim_params_t* p = r->p;
  fprintf(f, "# fco-sim %s  model %s: %s\n", FCO_SIM_VERSION, sim_model_name(r->model),
          kWhat[r->model]);
  if (r->model == SIM_MODEL_DLRM && p->fuse_bwd)
    fprintf(f, "#   and the interaction's last backward GEMM + gradient All-to-All (--fuse-bwd 1)\n");
  print_config(f, r);
  if (r->calib)
    fprintf(f, "# calib %s: fco-bench commit %s, %s, %d GPUs, %s transport, %d rows\n",
            base_name(r->calib->path), r->calib->commit, r->calib->machine, r->calib->gpus,
            r->calib->transport, r->calib->num);
  else
    fprintf(f, "# calib none: no measured rows, every time below is a model\n");
  fprintf(f, "# links: NVLink %g GB/s, %g us; NIC %g Gb/s x %g = %.1f GB/s per GPU, %g us\n",
          p->nvl_gbs, p->nvl_lat_us, p->nic_gbps, p->nic_eff, sim_link_gbs(p, SIM_LINK_NET),
          p->nic_lat_us);
  fprintf(f, "# schedule: fused tiles %s%s, per-rank compute jitter %g (seed %g)",
          p->remote_first ? "remote-first" : "local-first (remote last)",
          p->fco_pxn ? " relayed over rails (--fco-pxn 1)" : ", put directly", p->jitter, p->seed);
  if (r->model == SIM_MODEL_DLRM)
    fprintf(f, ", baseline overlap %g, DDP overlap %g", p->baseline_overlap, p->ddp_overlap);
  fputc('\n', f);
  /* every parameter, so a table can be reproduced from its header */
  int col = 0;
  for (int i = 0; i < sim_num_params; i++) {
    char item[64], flag[40];
    int n = snprintf(item, sizeof item, " --%s %g", sim_param_flag(i, flag, sizeof flag),
                     sim_param_get(p, i));
    if (col == 0 || col + n > 96) {
      fprintf(f, "%s# params:", col ? "\n" : "");
      col = 9;
    }
    fputs(item, f);
    col += n;
  }
  fputc('\n', f);
  fprintf(f, "# kernel times:\n");
  int roofline = 0;
  for (int i = 0; r->sources && i < r->sources->num; i++) {
    fprintf(f, "#   %-24s %s\n", r->sources->s[i].kernel, r->sources->s[i].source);
    roofline += strstr(r->sources->s[i].source, "not measured") != NULL;
  }
  if (roofline)
    fprintf(f, "# NOTE: %d of these kernel times are roofline estimates, not measurements: the table "
               "is a projection\n",
            roofline);
}

void sim_print_table(FILE* f, const sim_report_t* r, const sim_row_t* rows, int n) {
  fprintf(f, "#\n#%6s %6s %10s %12s %12s %8s %7s %9s %9s  %s\n", "nodes", "GPUs",
          batch_label(r->model), "baseline", "fused", "speedup", "saved", "exposed", "exposed",
          "baseline collectives");
  fprintf(f, "#%6s %6s %10s %12s %12s %8s %7s %9s %9s\n", "", "", "", "(us)", "(us)", "(x)",
          "(%)", "base(%)", "fused(%)");
  for (int i = 0; i < n; i++) {
    const sim_row_t* w = &rows[i];
    if (w->skipped) {
      fprintf(f, " %6d %6d %10g %12s %12s %8s %7s %9s %9s  -\n", w->nodes, w->ranks, w->batch, "-",
              "-", "-", "-", "-", "-");
      continue;
    }
    fprintf(f, " %6d %6d %10g %12.1f %12.1f %8.3f %7.1f %9.1f %9.1f  %s\n", w->nodes, w->ranks,
            w->batch, w->base_us, w->fused_us, w->speedup, w->saved_pct, w->exp_base_pct,
            w->exp_fused_pct, w->algo[0] ? w->algo : "-");
  }
  fprintf(f, "#\n");
  for (int i = 0; i < n; i++)
    fprintf(f, "# %d x %d GPUs, %s %g: %s\n", rows[i].nodes, rows[i].gpn,
            batch_label(r->model), rows[i].batch, rows[i].note);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_str(FILE* f, const char* s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

static void json_num(FILE* f, double v) {
  if (isfinite(v)) fprintf(f, "%.6g", v);
  else fputs("null", f);
}

int sim_write_json(const char* path, const sim_report_t* r, const sim_row_t* rows, int n,
                   char* err, size_t err_len) {
  FILE* f = fopen(path, "w");
  if (!f) {
    snprintf(err, err_len, "%s: cannot open for writing", path);
    return -1;
  }
  fprintf(f, "{\"tool\":\"fco-sim\",\"version\":\"%s\",\"model\":\"%s\",\"config\":{\"file\":",
          FCO_SIM_VERSION, sim_model_name(r->model));
  json_str(f, base_name(r->cfg->path));
  fprintf(f, ",\"name\":");
  json_str(f, r->cfg->name);
  fprintf(f, ",\"scaling\":\"%s\"},\n\"calib\":", r->strong ? "strong" : "weak");
  if (r->calib) {
    fprintf(f, "{\"file\":");
    json_str(f, base_name(r->calib->path));
    fprintf(f, ",\"commit\":");
    json_str(f, r->calib->commit);
    fprintf(f, ",\"machine\":");
    json_str(f, r->calib->machine);
    fprintf(f, ",\"gpus\":%d,\"rows\":%d}", r->calib->gpus, r->calib->num);
  } else {
    fputs("null", f);
  }
  fprintf(f, ",\n\"params\":{");
  for (int i = 0; i < sim_num_params; i++) {
    fprintf(f, "%s\"%s\":", i ? "," : "", sim_param_info[i].name);
    json_num(f, sim_param_get(r->p, i));
  }
  fprintf(f, "},\n\"kernel_sources\":[");
  for (int i = 0; r->sources && i < r->sources->num; i++) {
    fprintf(f, "%s{\"kernel\":", i ? "," : "");
    json_str(f, r->sources->s[i].kernel);
    fprintf(f, ",\"source\":");
    json_str(f, r->sources->s[i].source);
    fputc('}', f);
  }
  fprintf(f, "],\n\"results\":[");
  for (int i = 0; i < n; i++) {
    const sim_row_t* w = &rows[i];
    fprintf(f, "%s\n  {\"nodes\":%d,\"gpus_per_node\":%d,\"gpus\":%d,\"batch\":", i ? "," : "",
            w->nodes, w->gpn, w->ranks);
    json_num(f, w->batch);
    fprintf(f, ",\"skipped\":%s", w->skipped ? "true" : "false");
    if (!w->skipped) {
      static const char* const kKeys[] = {"baseline_us", "fused_us", "compute_only_us", "speedup",
                                          "saved_pct", "exposed_comm_baseline_pct",
                                          "exposed_comm_fused_pct"};
      double vals[] = {w->base_us, w->fused_us, w->compute_us, w->speedup, w->saved_pct,
                       w->exp_base_pct, w->exp_fused_pct};
      for (int k = 0; k < 7; k++) {
        fprintf(f, ",\"%s\":", kKeys[k]);
        json_num(f, vals[k]);
      }
      fprintf(f, ",\"baseline_collectives\":");
      json_str(f, w->algo);
      fprintf(f, ",\"parts\":[");
      for (int k = 0; k < w->num_parts; k++) {
        fprintf(f, "%s{\"name\":", k ? "," : "");
        json_str(f, w->part[k].name);
        fprintf(f, ",\"baseline_us\":");
        json_num(f, w->part[k].base_us);
        fprintf(f, ",\"fused_us\":");
        json_num(f, w->part[k].fused_us);
        fputc('}', f);
      }
      fputc(']', f);
    }
    fprintf(f, ",\"note\":");
    json_str(f, w->note);
    fputc('}', f);
  }
  fprintf(f, "\n]}\n");
  if (fclose(f)) {
    snprintf(err, err_len, "%s: write failed", path);
    return -1;
  }
  return 0;
}

/* ---- SVG ------------------------------------------------------------------------------- */

/* Text for an SVG (XML) element: & < > " ' escaped (a config named dlrm-r&d.cfg broke it). */
static void xml_str(FILE* f, const char* s) {
  for (; s && *s; s++) {
    const char* e = *s == '&'    ? "&amp;"
                    : *s == '<'  ? "&lt;"
                    : *s == '>'  ? "&gt;"
                    : *s == '"'  ? "&quot;"
                    : *s == '\'' ? "&apos;"
                                 : NULL;
    if (e) fputs(e, f);
    else fputc(*s, f);
  }
}

/* A "nice" tick step for a range (1, 2 or 5 x 10^k), about `want` ticks. */
static double nice_step(double range, int want) {
  double raw = range / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

int sim_write_svg(const char* path, const sim_report_t* r, const sim_row_t* rows, int n,
                  char* err, size_t err_len) {
  /* x: nodes for DLRM (the projection's axis), GPUs otherwise; log2 */
  int by_nodes = r->model == SIM_MODEL_DLRM;
  double xmin = INFINITY, xmax = -INFINITY, ymin = 1.0, ymax = 1.0;
  int pts = 0;
  for (int i = 0; i < n; i++) {
    if (rows[i].skipped) continue;
    double x = log2(by_nodes ? rows[i].nodes : rows[i].ranks);
    xmin = fmin(xmin, x), xmax = fmax(xmax, x);
    ymin = fmin(ymin, rows[i].speedup), ymax = fmax(ymax, rows[i].speedup);
    pts++;
  }
  if (!pts) {
    snprintf(err, err_len, "%s: no rows to plot", path);
    return -1;
  }
  int paper = by_nodes && xmin <= 7 && xmax >= 7; /* SC'24's 128-node point */
  if (paper) ymax = fmax(ymax, 1.27);
  /* one point: centred, an axis unit either side (only ticks >= 2^0 are drawn, below) */
  if (xmax == xmin) xmin -= 1, xmax += 1;
  /* rows come world by world, `series` batches each: one line per batch, with a legend */
  int series = r->series > 1 && n % r->series == 0 ? r->series : 1;
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                        "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728"};
  const int num_colors = (int)(sizeof kColors / sizeof kColors[0]);
  double ystep = nice_step(ymax - ymin > 0.05 ? ymax - ymin : 0.05, 5);
  ymin = floor(ymin / ystep) * ystep;
  ymax = ceil(ymax / ystep) * ystep;
  if (ymax <= ymin) ymax = ymin + ystep;
  const double W = 720, H = 440, L = 70, R = 30, T = 50, B = 60;
  FILE* f = fopen(path, "w");
  if (!f) {
    snprintf(err, err_len, "%s: cannot open for writing", path);
    return -1;
  }
#define SX(x) (L + ((x) - xmin) / (xmax - xmin) * (W - L - R))
#define SY(y) (H - B - ((y) - ymin) / (ymax - ymin) * (H - T - B))
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
             "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\" font-size=\"12\">\n",
          W, H, W, H);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f, "<text x=\"%g\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">fco-sim %s: ",
          W / 2, sim_model_name(r->model));
  xml_str(f, r->cfg->name);
  fprintf(f, ", fused vs unfused (%d GPUs per node)</text>\n", rows[0].gpn);
  for (double y = ymin; y <= ymax + ystep / 2; y += ystep) {
    fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, SY(y),
            W - R, SY(y));
    fprintf(f, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", L - 6, SY(y) + 4, y);
  }
  /* ticks at powers of two from 2^0 (one point at 1 node put the axis at -1: 1 << -1) */
  for (int e = (int)fmax(0, ceil(xmin)); e <= (int)floor(xmax); e++) {
    fprintf(f, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/>\n", SX(e), T,
            SX(e), H - B);
    fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n", SX(e),
            H - B + 18, ldexp(1, e));
  }
  fprintf(f, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#888\" "
             "stroke-dasharray=\"4 4\"/>\n",
          L, SY(1.0), W - R, SY(1.0));
  fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#000\"/>\n",
          L, T, W - L - R, H - T - B);
  fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s (log2 scale)</text>\n",
          (L + W - R) / 2, H - 18, by_nodes ? "nodes" : "GPUs");
  fprintf(f, "<text x=\"18\" y=\"%g\" text-anchor=\"middle\" transform=\"rotate(-90 18 %g)\">"
             "speedup: baseline time / fused time</text>\n",
          (T + H - B) / 2, (T + H - B) / 2);
  for (int b = 0; b < series; b++) {
    const char* color = kColors[b % num_colors];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int i = b; i < n; i += series)
      if (!rows[i].skipped)
        fprintf(f, "%.1f,%.1f ", SX(log2(by_nodes ? rows[i].nodes : rows[i].ranks)),
                SY(rows[i].speedup));
    fprintf(f, "\"/>\n");
    for (int i = b; i < n; i += series) {
      if (rows[i].skipped) continue;
      double x = SX(log2(by_nodes ? rows[i].nodes : rows[i].ranks)), y = SY(rows[i].speedup);
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", x, y, color);
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%.2f"
                 "</text>\n",
              x, y - 8, rows[i].speedup);
    }
  }
  if (series > 1) { /* the legend: one entry per batch, top left, 16 entries a column */
    int per_col = 16, cols = (series + per_col - 1) / per_col;
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%d\" height=\"%d\" fill=\"white\" "
               "stroke=\"#888\"/>\n",
            L + 8, T + 8, 140 * cols, 8 + 16 * (series < per_col ? series : per_col));
    for (int b = 0; b < series; b++) {
      double x = L + 140 * (b / per_col), y = T + 20 + 16 * (b % per_col);
      fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" "
                 "stroke-width=\"2\"/>\n",
              x + 14, y - 4, x + 34, y - 4, kColors[b % num_colors]);
      fprintf(f, "<text x=\"%g\" y=\"%g\">%s %g</text>\n", x + 40, y, batch_label(r->model),
              rows[b].batch);
    }
  }
  if (paper) {
    /* "21% faster" read as 1.21x, or as 21% less time (1.27x): both ends drawn */
    double x = SX(7.0);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
               "stroke-width=\"3\"/>\n",
            x, SY(1.21), x, SY(1.0 / 0.79));
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#d62728\">SC'24 paper: "
               "21%% at 128 nodes (simulated, AMD)</text>\n",
            x - 8, SY(1.0 / 0.79) - 4);
  }
#undef SX
#undef SY
  fprintf(f, "</svg>\n");
  if (fclose(f)) {
    snprintf(err, err_len, "%s: write failed", path);
    return -1;
  }
  return 0;
}
