let wasm_bindgen = (function(exports) {
    let script_src;
    if (typeof document !== 'undefined' && document.currentScript !== null) {
        script_src = new URL(document.currentScript.src, location.href).toString();
    }

    /**
     * The cross-run comparison.
     */
    class CompareView {
        __destroy_into_raw() {
            const ptr = this.__wbg_ptr;
            this.__wbg_ptr = 0;
            CompareViewFinalization.unregister(this);
            return ptr;
        }
        free() {
            const ptr = this.__destroy_into_raw();
            wasm.__wbg_compareview_free(ptr, 0);
        }
        /**
         * Adds a run from its `bundle.json` text under `site_id` (its directory name in the
         * site, what `render`'s `ids` name); a second add of the same id replaces the first.
         * @param {string} site_id
         * @param {string} bundle
         */
        add_run(site_id, bundle) {
            let ptr0, len0, ptr1, len1;
            try {
                ptr0 = passStringToWasm0(site_id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len0 = WASM_VECTOR_LEN;
                ptr1 = passStringToWasm0(bundle, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len1 = WASM_VECTOR_LEN;
            } catch (e) {
                if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                throw e;
            }
            const ret = wasm.compareview_add_run(this.__wbg_ptr, ptr0, len0, ptr1, len1);
            if (ret[1]) {
                throw takeFromExternrefTable0(ret[0]);
            }
        }
        /**
         * The diff of the two loaded runs named in `ids` (comma-separated site ids; A is the one
         * captured first) as [`crate::run_diff::DiffView`] JSON; an error unless `ids` names
         * exactly two loaded runs.
         * @param {string} ids
         * @returns {string}
         */
        diff(ids) {
            let deferred3_0;
            let deferred3_1;
            try {
                const ptr0 = passStringToWasm0(ids, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                const len0 = WASM_VECTOR_LEN;
                const ret = wasm.compareview_diff(this.__wbg_ptr, ptr0, len0);
                var ptr2 = ret[0];
                var len2 = ret[1];
                if (ret[3]) {
                    ptr2 = 0; len2 = 0;
                    throw takeFromExternrefTable0(ret[2]);
                }
                deferred3_0 = ptr2;
                deferred3_1 = len2;
                return getStringFromWasm0(ptr2, len2);
            } finally {
                wasm.__wbindgen_free(deferred3_0, deferred3_1, 1);
            }
        }
        /**
         * @param {HTMLCanvasElement} canvas
         */
        constructor(canvas) {
            const ret = wasm.compareview_new(canvas);
            this.__wbg_ptr = ret;
            CompareViewFinalization.register(this, this.__wbg_ptr, this);
            return this;
        }
        /**
         * Draws the runs named in `ids` (comma-separated; empty = all) normalised by `norm`
         * (`token`, `step` or `share`) at `dpr`; returns the notes as JSON.
         * @param {string} ids
         * @param {string} norm
         * @param {number} dpr
         * @returns {string}
         */
        render(ids, norm, dpr) {
            let deferred5_0;
            let deferred5_1;
            try {
                const val3 = +dpr;
                let ptr0, len0, ptr1, len1;
                try {
                    ptr0 = passStringToWasm0(ids, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len0 = WASM_VECTOR_LEN;
                    ptr1 = passStringToWasm0(norm, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len1 = WASM_VECTOR_LEN;
                } catch (e) {
                    if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                    if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                    throw e;
                }
                const ret = wasm.compareview_render(this.__wbg_ptr, ptr0, len0, ptr1, len1, val3);
                var ptr4 = ret[0];
                var len4 = ret[1];
                if (ret[3]) {
                    ptr4 = 0; len4 = 0;
                    throw takeFromExternrefTable0(ret[2]);
                }
                deferred5_0 = ptr4;
                deferred5_1 = len4;
                return getStringFromWasm0(ptr4, len4);
            } finally {
                wasm.__wbindgen_free(deferred5_0, deferred5_1, 1);
            }
        }
        /**
         * The same figure as an SVG document (text measured on the canvas, as on screen).
         * @param {string} ids
         * @param {string} norm
         * @returns {string}
         */
        svg(ids, norm) {
            let deferred4_0;
            let deferred4_1;
            try {
                let ptr0, len0, ptr1, len1;
                try {
                    ptr0 = passStringToWasm0(ids, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len0 = WASM_VECTOR_LEN;
                    ptr1 = passStringToWasm0(norm, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len1 = WASM_VECTOR_LEN;
                } catch (e) {
                    if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                    if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                    throw e;
                }
                const ret = wasm.compareview_svg(this.__wbg_ptr, ptr0, len0, ptr1, len1);
                var ptr3 = ret[0];
                var len3 = ret[1];
                if (ret[3]) {
                    ptr3 = 0; len3 = 0;
                    throw takeFromExternrefTable0(ret[2]);
                }
                deferred4_0 = ptr3;
                deferred4_1 = len3;
                return getStringFromWasm0(ptr3, len3);
            } finally {
                wasm.__wbindgen_free(deferred4_0, deferred4_1, 1);
            }
        }
    }
    if (Symbol.dispose) CompareView.prototype[Symbol.dispose] = CompareView.prototype.free;
    exports.CompareView = CompareView;

    /**
     * The interactive kernel timeline of one run.
     */
    class TimelineView {
        static __wrap(ptr) {
            const obj = Object.create(TimelineView.prototype);
            obj.__wbg_ptr = ptr;
            TimelineViewFinalization.register(obj, obj.__wbg_ptr, obj);
            return obj;
        }
        __destroy_into_raw() {
            const ptr = this.__wbg_ptr;
            this.__wbg_ptr = 0;
            TimelineViewFinalization.unregister(this);
            return ptr;
        }
        free() {
            const ptr = this.__destroy_into_raw();
            wasm.__wbg_timelineview_free(ptr, 0);
        }
        /**
         * Decodes chunk `i` from the base64 text of its script.
         * @param {number} i
         * @param {string} base64_text
         */
        add_chunk(i, base64_text) {
            const val2 = +i;
            const ptr0 = passStringToWasm0(base64_text, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.timelineview_add_chunk(this.__wbg_ptr, val2, ptr0, len0);
            if (ret[1]) {
                throw takeFromExternrefTable0(ret[0]);
            }
        }
        /**
         * Shows another rank of the same multi-rank run beside the ones shown (`site_id` is its
         * site id, `<run>/ranks/<r>`): its lanes below theirs, on one time axis. Returns how the
         * clocks were aligned. Fails, changing nothing, when either run is not a rank or its rank
         * is already shown under another id.
         * @param {string} site_id
         * @param {string} bundle
         * @param {string} timeline
         * @returns {string}
         */
        add_rank(site_id, bundle, timeline) {
            let deferred5_0;
            let deferred5_1;
            try {
                let ptr0, len0, ptr1, len1, ptr2, len2;
                try {
                    ptr0 = passStringToWasm0(site_id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len0 = WASM_VECTOR_LEN;
                    ptr1 = passStringToWasm0(bundle, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len1 = WASM_VECTOR_LEN;
                    ptr2 = passStringToWasm0(timeline, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                    len2 = WASM_VECTOR_LEN;
                } catch (e) {
                    if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
                    if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                    if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                    throw e;
                }
                const ret = wasm.timelineview_add_rank(this.__wbg_ptr, ptr0, len0, ptr1, len1, ptr2, len2);
                var ptr4 = ret[0];
                var len4 = ret[1];
                if (ret[3]) {
                    ptr4 = 0; len4 = 0;
                    throw takeFromExternrefTable0(ret[2]);
                }
                deferred5_0 = ptr4;
                deferred5_1 = len4;
                return getStringFromWasm0(ptr4, len4);
            } finally {
                wasm.__wbindgen_free(deferred5_0, deferred5_1, 1);
            }
        }
        /**
         * Restores a view from a URL hash; returns the query it holds (for the search box).
         * @param {string} hash
         * @returns {string}
         */
        apply_hash(hash) {
            let deferred2_0;
            let deferred2_1;
            try {
                const ptr0 = passStringToWasm0(hash, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                const len0 = WASM_VECTOR_LEN;
                const ret = wasm.timelineview_apply_hash(this.__wbg_ptr, ptr0, len0);
                deferred2_0 = ret[0];
                deferred2_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
            }
        }
        /**
         * Drops a range drag in progress (a drag that ended as a click, or was cancelled).
         */
        cancel_drag() {
            wasm.timelineview_cancel_drag(this.__wbg_ptr);
        }
        /**
         * What a chunked timeline shows of its kernels, for the page; `""` for one loaded whole.
         * @returns {string}
         */
        chunk_status() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_chunk_status(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Opens a chunked timeline from its head (`timeline.js` of a run with more kernels than
         * the site loads at once): the overview shows until [`TimelineView::use_chunks`] has
         * the window's kernels.
         * @param {HTMLCanvasElement} canvas
         * @param {string} site_id
         * @param {string} bundle
         * @param {string} head
         * @param {number} css_width
         * @param {number} dpr
         * @returns {TimelineView}
         */
        static chunked(canvas, site_id, bundle, head, css_width, dpr) {
            const val4 = +css_width;
            const val5 = +dpr;
            let ptr0, len0, ptr1, len1, ptr2, len2;
            try {
                ptr0 = passStringToWasm0(site_id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len0 = WASM_VECTOR_LEN;
                ptr1 = passStringToWasm0(bundle, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len1 = WASM_VECTOR_LEN;
                ptr2 = passStringToWasm0(head, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len2 = WASM_VECTOR_LEN;
            } catch (e) {
                if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
                if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                throw e;
            }
            const ret = wasm.timelineview_chunked(canvas, ptr0, len0, ptr1, len1, ptr2, len2, val4, val5);
            if (ret[2]) {
                throw takeFromExternrefTable0(ret[1]);
            }
            return TimelineView.__wrap(ret[0]);
        }
        /**
         * The chunks the window needs that are not decoded yet (load their scripts and pass each
         * to [`TimelineView::add_chunk`]); empty when none are, or when the window holds more
         * kernels than load at once.
         * @returns {Uint32Array}
         */
        chunks_wanted() {
            const ret = wasm.timelineview_chunks_wanted(this.__wbg_ptr);
            var v1 = getArrayU32FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 4, 4);
            return v1;
        }
        clear_selection() {
            wasm.timelineview_clear_selection(this.__wbg_ptr);
        }
        /**
         * Click at `(x, y)`: a stage bar zooms to its instance; a kernel or memcpy is pinned (a
         * second click on it unpins). Returns the pinned details JSON, or `""`.
         * @param {number} x
         * @param {number} y
         * @returns {string}
         */
        click(x, y) {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_click(this.__wbg_ptr, x, y);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * A range drag in progress between canvas x positions.
         * @param {number} x0
         * @param {number} x1
         */
        drag_range(x0, x1) {
            wasm.timelineview_drag_range(this.__wbg_ptr, x0, x1);
        }
        /**
         * The view as a URL hash (without `#`).
         * @returns {string}
         */
        hash() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_hash(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Hover at canvas `(x, y)`: the tooltip as JSON `[[label, value], ...]`, or `""`.
         * @param {number} x
         * @param {number} y
         * @returns {string}
         */
        hover(x, y) {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_hover(this.__wbg_ptr, x, y);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Whether the run's kernels load in chunks.
         * @returns {boolean}
         */
        get is_chunked() {
            const ret = wasm.timelineview_is_chunked(this.__wbg_ptr);
            return ret !== 0;
        }
        /**
         * `[start, end]` (ns) of kernel op `i`, or empty past the end.
         * @param {number} i
         * @returns {Float64Array}
         */
        kernel_span(i) {
            const ret = wasm.timelineview_kernel_span(this.__wbg_ptr, i);
            var v1 = getArrayF64FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 8, 8);
            return v1;
        }
        leave() {
            wasm.timelineview_leave(this.__wbg_ptr);
        }
        /**
         * The legend: `[[category, colour], ...]` of the categories this run has.
         * @returns {string}
         */
        legend() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_legend(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Canvas x (CSS px) of the middle of kernel op `i` and y of its lane, as `[x, y]`, or
         * empty when it is off screen. For tests and the "go to" of a pinned kernel.
         * @param {number} i
         * @returns {Float64Array}
         */
        locate_kernel(i) {
            const ret = wasm.timelineview_locate_kernel(this.__wbg_ptr, i);
            var v1 = getArrayF64FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 8, 8);
            return v1;
        }
        /**
         * Parses the run (`site_id` is its directory name in the site) and sizes the canvas to
         * `css_width` CSS pixels at `dpr` device pixels per CSS pixel.
         * @param {HTMLCanvasElement} canvas
         * @param {string} site_id
         * @param {string} bundle
         * @param {string} timeline
         * @param {number} css_width
         * @param {number} dpr
         */
        constructor(canvas, site_id, bundle, timeline, css_width, dpr) {
            const val4 = +css_width;
            const val5 = +dpr;
            let ptr0, len0, ptr1, len1, ptr2, len2;
            try {
                ptr0 = passStringToWasm0(site_id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len0 = WASM_VECTOR_LEN;
                ptr1 = passStringToWasm0(bundle, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len1 = WASM_VECTOR_LEN;
                ptr2 = passStringToWasm0(timeline, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                len2 = WASM_VECTOR_LEN;
            } catch (e) {
                if (ptr2) { wasm.__wbindgen_free(ptr2, len2 * 1, 1); }
                if (ptr1) { wasm.__wbindgen_free(ptr1, len1 * 1, 1); }
                if (ptr0) { wasm.__wbindgen_free(ptr0, len0 * 1, 1); }
                throw e;
            }
            const ret = wasm.timelineview_new(canvas, ptr0, len0, ptr1, len1, ptr2, len2, val4, val5);
            if (ret[2]) {
                throw takeFromExternrefTable0(ret[1]);
            }
            this.__wbg_ptr = ret[0];
            TimelineViewFinalization.register(this, this.__wbg_ptr, this);
            return this;
        }
        /**
         * Whether canvas y is on the time axis (a drag there selects a range).
         * @param {number} y
         * @returns {boolean}
         */
        on_axis(y) {
            const ret = wasm.timelineview_on_axis(this.__wbg_ptr, y);
            return ret !== 0;
        }
        /**
         * Pans by CSS pixels (positive moves later in time).
         * @param {number} dx
         */
        pan(dx) {
            wasm.timelineview_pan(this.__wbg_ptr, dx);
        }
        /**
         * Details of the pinned item as JSON, or `""`.
         * @returns {string}
         */
        pinned_details() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_pinned_details(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * The selected range's table as JSON, or `""`.
         * @returns {string}
         */
        range_json() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_range_json(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * The site ids of the ranks shown beside the opened run, as a JSON array.
         * @returns {string}
         */
        ranks_beside() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_ranks_beside(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Takes a rank added with [`TimelineView::add_rank`] off the view; `false` when it is
         * not shown beside the opened run.
         * @param {string} site_id
         * @returns {boolean}
         */
        remove_rank(site_id) {
            const ptr0 = passStringToWasm0(site_id, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
            const len0 = WASM_VECTOR_LEN;
            const ret = wasm.timelineview_remove_rank(this.__wbg_ptr, ptr0, len0);
            return ret !== 0;
        }
        /**
         * Draws the current view.
         */
        render() {
            wasm.timelineview_render(this.__wbg_ptr);
        }
        /**
         * The whole run.
         */
        reset() {
            wasm.timelineview_reset(this.__wbg_ptr);
        }
        /**
         * @param {number} css_width
         * @param {number} dpr
         */
        resize(css_width, dpr) {
            wasm.timelineview_resize(this.__wbg_ptr, css_width, dpr);
        }
        /**
         * Sets the search query; returns the status line (matches, or why the query is bad).
         * @param {string} query
         * @returns {string}
         */
        search(query) {
            let deferred2_0;
            let deferred2_1;
            try {
                const ptr0 = passStringToWasm0(query, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                const len0 = WASM_VECTOR_LEN;
                const ret = wasm.timelineview_search(this.__wbg_ptr, ptr0, len0);
                deferred2_0 = ret[0];
                deferred2_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred2_0, deferred2_1, 1);
            }
        }
        /**
         * Ends a range drag: selects it and returns the range table JSON.
         * @param {number} x0
         * @param {number} x1
         * @returns {string}
         */
        select_range(x0, x1) {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_select_range(this.__wbg_ptr, x0, x1);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Selects the visible window (the keyboard's way to a range table).
         * @returns {string}
         */
        select_visible() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_select_visible(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * Keyboard inspection: pins the next (`dir` > 0) or previous kernel in time order — the
         * first one at or after the middle of the view when none is pinned — and pans to keep it
         * in view. Returns the pinned details JSON.
         * @param {number} dir
         * @returns {string}
         */
        step_pin(dir) {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_step_pin(this.__wbg_ptr, dir);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * One line about the run for the page header.
         * @returns {string}
         */
        summary() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_summary(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        /**
         * @returns {string}
         */
        get title() {
            let deferred1_0;
            let deferred1_1;
            try {
                const ret = wasm.timelineview_title(this.__wbg_ptr);
                deferred1_0 = ret[0];
                deferred1_1 = ret[1];
                return getStringFromWasm0(ret[0], ret[1]);
            } finally {
                wasm.__wbindgen_free(deferred1_0, deferred1_1, 1);
            }
        }
        unpin() {
            wasm.timelineview_unpin(this.__wbg_ptr);
        }
        /**
         * Makes the window's chunks the run's kernels once all are decoded; whether the view
         * changed (then draw it again). A chunk the run refuses is an error, and nothing changes.
         * @returns {boolean}
         */
        use_chunks() {
            const ret = wasm.timelineview_use_chunks(this.__wbg_ptr);
            if (ret[2]) {
                throw takeFromExternrefTable0(ret[1]);
            }
            return ret[0] !== 0;
        }
        /**
         * Wheel at canvas x: zoom (positive `dy` zooms out).
         * @param {number} x
         * @param {number} dy
         */
        wheel_zoom(x, dy) {
            wasm.timelineview_wheel_zoom(this.__wbg_ptr, x, dy);
        }
        /**
         * Visible window `[t0, t1]`, ns.
         * @returns {Float64Array}
         */
        window() {
            const ret = wasm.timelineview_window(this.__wbg_ptr);
            var v1 = getArrayF64FromWasm0(ret[0], ret[1]).slice();
            wasm.__wbindgen_free(ret[0], ret[1] * 8, 8);
            return v1;
        }
        /**
         * Zooms by `factor` around the middle (keys, buttons, pinch).
         * @param {number} factor
         * @param {number | null} [x]
         */
        zoom_by(factor, x) {
            wasm.timelineview_zoom_by(this.__wbg_ptr, factor, !isLikeNone(x), isLikeNone(x) ? 0 : x);
        }
        /**
         * Zooms to the selected range.
         */
        zoom_to_selection() {
            wasm.timelineview_zoom_to_selection(this.__wbg_ptr);
        }
    }
    if (Symbol.dispose) TimelineView.prototype[Symbol.dispose] = TimelineView.prototype.free;
    exports.TimelineView = TimelineView;
    function __wbg_get_imports() {
        const import0 = {
            __proto__: null,
            __wbg_Error_208446807d0d1e30: function(arg0, arg1) {
                const ret = Error(getStringFromWasm0(arg0, arg1));
                return ret;
            },
            __wbg___wbindgen_string_get_7ce8eee7fd327545: function(arg0, arg1) {
                const obj = arg1;
                const ret = typeof(obj) === 'string' ? obj : undefined;
                var ptr1 = isLikeNone(ret) ? 0 : passStringToWasm0(ret, wasm.__wbindgen_malloc, wasm.__wbindgen_realloc);
                var len1 = WASM_VECTOR_LEN;
                getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 1, len1, true);
                getDataViewMemory0().setInt32((arg0 >>> 0) + 4 * 0, ptr1, true);
            },
            __wbg___wbindgen_throw_4c88d8bf264fd984: function(arg0, arg1) {
                throw new Error(getStringFromWasm0(arg0, arg1));
            },
            __wbg_beginPath_ab690dc0c7efe6dc: function(arg0) {
                arg0.beginPath();
            },
            __wbg_clip_26239db7c0b67972: function(arg0) {
                arg0.clip();
            },
            __wbg_fillRect_e1f0b9915220348b: function(arg0, arg1, arg2, arg3, arg4) {
                arg0.fillRect(arg1, arg2, arg3, arg4);
            },
            __wbg_fillText_89d353a9ad9f4a1a: function() { return handleError(function (arg0, arg1, arg2, arg3, arg4) {
                arg0.fillText(getStringFromWasm0(arg1, arg2), arg3, arg4);
            }, arguments); },
            __wbg_getContext_d93f904b714852ae: function() { return handleError(function (arg0, arg1, arg2) {
                const ret = arg0.getContext(getStringFromWasm0(arg1, arg2));
                return isLikeNone(ret) ? 0 : addToExternrefTable0(ret);
            }, arguments); },
            __wbg_height_ac6f1c3f49c13fe2: function(arg0) {
                const ret = arg0.height;
                return ret;
            },
            __wbg_instanceof_CanvasRenderingContext2d_72a60be8aaadecab: function(arg0) {
                let result;
                try {
                    result = arg0 instanceof CanvasRenderingContext2D;
                } catch (_) {
                    result = false;
                }
                const ret = result;
                return ret;
            },
            __wbg_lineTo_91262b25fb37c461: function(arg0, arg1, arg2) {
                arg0.lineTo(arg1, arg2);
            },
            __wbg_measureText_d831259b682a3f7d: function() { return handleError(function (arg0, arg1, arg2) {
                const ret = arg0.measureText(getStringFromWasm0(arg1, arg2));
                return ret;
            }, arguments); },
            __wbg_moveTo_b4cd3b0b7e1585a5: function(arg0, arg1, arg2) {
                arg0.moveTo(arg1, arg2);
            },
            __wbg_rect_ab5601e64afdbc33: function(arg0, arg1, arg2, arg3, arg4) {
                arg0.rect(arg1, arg2, arg3, arg4);
            },
            __wbg_restore_f322d9dcee2d3472: function(arg0) {
                arg0.restore();
            },
            __wbg_rotate_c33a3db69ad81687: function() { return handleError(function (arg0, arg1) {
                arg0.rotate(arg1);
            }, arguments); },
            __wbg_save_1375b4c2f3596b8b: function(arg0) {
                arg0.save();
            },
            __wbg_setProperty_3fe74e09d53acb0b: function() { return handleError(function (arg0, arg1, arg2, arg3, arg4) {
                arg0.setProperty(getStringFromWasm0(arg1, arg2), getStringFromWasm0(arg3, arg4));
            }, arguments); },
            __wbg_setTransform_ee8f5d076fcdec0f: function() { return handleError(function (arg0, arg1, arg2, arg3, arg4, arg5, arg6) {
                arg0.setTransform(arg1, arg2, arg3, arg4, arg5, arg6);
            }, arguments); },
            __wbg_set_fillStyle_95fde67582a9c695: function(arg0, arg1, arg2) {
                arg0.fillStyle = getStringFromWasm0(arg1, arg2);
            },
            __wbg_set_fillStyle_f2819d67645a21ba: function(arg0, arg1) {
                arg0.fillStyle = arg1;
            },
            __wbg_set_font_aa0c0c514c73a5fa: function(arg0, arg1, arg2) {
                arg0.font = getStringFromWasm0(arg1, arg2);
            },
            __wbg_set_globalAlpha_4bdefe001e9c79ce: function(arg0, arg1) {
                arg0.globalAlpha = arg1;
            },
            __wbg_set_height_ae0610d318c3428c: function(arg0, arg1) {
                arg0.height = arg1 >>> 0;
            },
            __wbg_set_lineWidth_12f039d09cd36dad: function(arg0, arg1) {
                arg0.lineWidth = arg1;
            },
            __wbg_set_strokeStyle_b90c8a6e0d37c80d: function(arg0, arg1, arg2) {
                arg0.strokeStyle = getStringFromWasm0(arg1, arg2);
            },
            __wbg_set_strokeStyle_c0ecdaf8c4f0942f: function(arg0, arg1) {
                arg0.strokeStyle = arg1;
            },
            __wbg_set_textAlign_0a32c51401892c11: function(arg0, arg1, arg2) {
                arg0.textAlign = getStringFromWasm0(arg1, arg2);
            },
            __wbg_set_textBaseline_ff2e3c5c84684b23: function(arg0, arg1, arg2) {
                arg0.textBaseline = getStringFromWasm0(arg1, arg2);
            },
            __wbg_set_width_5f89a551b5472887: function(arg0, arg1) {
                arg0.width = arg1 >>> 0;
            },
            __wbg_stringify_0a0fbf2ef722380a: function() { return handleError(function (arg0) {
                const ret = JSON.stringify(arg0);
                return ret;
            }, arguments); },
            __wbg_strokeRect_92ff808375332184: function(arg0, arg1, arg2, arg3, arg4) {
                arg0.strokeRect(arg1, arg2, arg3, arg4);
            },
            __wbg_stroke_19fa3f3ec093bc25: function(arg0) {
                arg0.stroke();
            },
            __wbg_style_f499e599ac70277f: function(arg0) {
                const ret = arg0.style;
                return ret;
            },
            __wbg_translate_73a88129c5d9f3b2: function() { return handleError(function (arg0, arg1, arg2) {
                arg0.translate(arg1, arg2);
            }, arguments); },
            __wbg_width_28f5533f1b3b5abc: function(arg0) {
                const ret = arg0.width;
                return ret;
            },
            __wbg_width_babc5dc7654771b1: function(arg0) {
                const ret = arg0.width;
                return ret;
            },
            __wbindgen_generic_0000000000000001: function(arg0, arg1) {
                // Cast intrinsic for `Ref(String) -> Externref`.
                const ret = getStringFromWasm0(arg0, arg1);
                return ret;
            },
            __wbindgen_init_externref_table: function() {
                const table = wasm.__wbindgen_externrefs;
                table.set(0, undefined);
                table.set(1024, undefined);
                table.set(1025, null);
                table.set(1026, true);
                table.set(1027, false);
            },
        };
        return {
            __proto__: null,
            "./llmprof_viewer_bg.js": import0,
        };
    }

    const CompareViewFinalization = (typeof FinalizationRegistry === 'undefined')
        ? { register: () => {}, unregister: () => {} }
        : new FinalizationRegistry(ptr => wasm.__wbg_compareview_free(ptr, 1));
    const TimelineViewFinalization = (typeof FinalizationRegistry === 'undefined')
        ? { register: () => {}, unregister: () => {} }
        : new FinalizationRegistry(ptr => wasm.__wbg_timelineview_free(ptr, 1));

    function addToExternrefTable0(obj) {
        const idx = wasm.__externref_table_alloc();
        wasm.__wbindgen_externrefs.set(idx, obj);
        return idx;
    }

    function getArrayF64FromWasm0(ptr, len) {
        ptr = ptr >>> 0;
        return getFloat64ArrayMemory0().subarray(ptr / 8, ptr / 8 + len);
    }

    function getArrayU32FromWasm0(ptr, len) {
        ptr = ptr >>> 0;
        return getUint32ArrayMemory0().subarray(ptr / 4, ptr / 4 + len);
    }

    let cachedDataViewMemory0 = null;
    function getDataViewMemory0() {
        if (cachedDataViewMemory0 === null || cachedDataViewMemory0.buffer.detached === true || (cachedDataViewMemory0.buffer.detached === undefined && cachedDataViewMemory0.buffer !== wasm.memory.buffer)) {
            cachedDataViewMemory0 = new DataView(wasm.memory.buffer);
        }
        return cachedDataViewMemory0;
    }

    let cachedFloat64ArrayMemory0 = null;
    function getFloat64ArrayMemory0() {
        if (cachedFloat64ArrayMemory0 === null || cachedFloat64ArrayMemory0.byteLength === 0) {
            cachedFloat64ArrayMemory0 = new Float64Array(wasm.memory.buffer);
        }
        return cachedFloat64ArrayMemory0;
    }

    function getStringFromWasm0(ptr, len) {
        ptr = ptr >>> 0;
        return decodeText(getUint8ArrayMemory0().subarray(ptr, ptr + len));
    }

    let cachedUint32ArrayMemory0 = null;
    function getUint32ArrayMemory0() {
        if (cachedUint32ArrayMemory0 === null || cachedUint32ArrayMemory0.byteLength === 0) {
            cachedUint32ArrayMemory0 = new Uint32Array(wasm.memory.buffer);
        }
        return cachedUint32ArrayMemory0;
    }

    let cachedUint8ArrayMemory0 = null;
    function getUint8ArrayMemory0() {
        if (cachedUint8ArrayMemory0 === null || cachedUint8ArrayMemory0.byteLength === 0) {
            cachedUint8ArrayMemory0 = new Uint8Array(wasm.memory.buffer);
        }
        return cachedUint8ArrayMemory0;
    }

    function handleError(f, args) {
        try {
            return f.apply(this, args);
        } catch (e) {
            const idx = addToExternrefTable0(e);
            wasm.__wbindgen_exn_store(idx);
        }
    }

    function isLikeNone(x) {
        return x === undefined || x === null;
    }

    function passStringToWasm0(arg, malloc, realloc) {
        if (realloc === undefined) {
            const buf = cachedTextEncoder.encode(arg);
            const ptr = malloc(buf.length, 1) >>> 0;
            getUint8ArrayMemory0().subarray(ptr, ptr + buf.length).set(buf);
            WASM_VECTOR_LEN = buf.length;
            return ptr;
        }

        let len = arg.length;
        let ptr = malloc(len, 1) >>> 0;

        const mem = getUint8ArrayMemory0();

        let offset = 0;

        for (; offset < len; offset++) {
            const code = arg.charCodeAt(offset);
            if (code > 0x7F) break;
            mem[ptr + offset] = code;
        }
        if (offset !== len) {
            if (offset !== 0) {
                arg = arg.slice(offset);
            }
            ptr = realloc(ptr, len, len = offset + arg.length * 3, 1) >>> 0;
            const view = getUint8ArrayMemory0().subarray(ptr + offset, ptr + len);
            const ret = cachedTextEncoder.encodeInto(arg, view);

            offset += ret.written;
            ptr = realloc(ptr, len, offset, 1) >>> 0;
        }

        WASM_VECTOR_LEN = offset;
        return ptr;
    }

    function takeFromExternrefTable0(idx) {
        const value = wasm.__wbindgen_externrefs.get(idx);
        wasm.__externref_table_dealloc(idx);
        return value;
    }

    let cachedTextDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
    cachedTextDecoder.decode();
    function decodeText(bytes) {
        return cachedTextDecoder.decode(bytes);
    }

    const cachedTextEncoder = new TextEncoder();

    if (!('encodeInto' in cachedTextEncoder)) {
        cachedTextEncoder.encodeInto = function (arg, view) {
            const buf = cachedTextEncoder.encode(arg);
            view.set(buf);
            return {
                read: arg.length,
                written: buf.length
            };
        };
    }

    let WASM_VECTOR_LEN = 0;

    let wasmModule, wasmInstance, wasm;
    function __wbg_finalize_init(instance, module) {
        wasmInstance = instance;
        wasm = instance.exports;
        wasmModule = module;
        cachedDataViewMemory0 = null;
        cachedFloat64ArrayMemory0 = null;
        cachedUint32ArrayMemory0 = null;
        cachedUint8ArrayMemory0 = null;
        wasm.__wbindgen_start();
        return wasm;
    }

    async function __wbg_load(module, imports) {
        if (typeof Response === 'function' && module instanceof Response) {
            if (!module.ok) {
                throw new Error(`failed to fetch Wasm: ${module.status} ${module.statusText} fetching '${module.url}'`);
            }

            if (typeof WebAssembly.instantiateStreaming === 'function') {
                try {
                    return await WebAssembly.instantiateStreaming(module, imports);
                } catch (e) {
                    const validResponse = expectedResponseType(module.type);

                    if (validResponse && module.headers.get('Content-Type') !== 'application/wasm') {
                        console.warn("`WebAssembly.instantiateStreaming` failed because your server does not serve Wasm with `application/wasm` MIME type. Falling back to `WebAssembly.instantiate` which is slower. Original error:\n", e);

                    } else { throw e; }
                }
            }

            const bytes = await module.arrayBuffer();
            return await WebAssembly.instantiate(bytes, imports);
        } else {
            const instance = await WebAssembly.instantiate(module, imports);

            if (instance instanceof WebAssembly.Instance) {
                return { instance, module };
            } else {
                return instance;
            }
        }

        function expectedResponseType(type) {
            switch (type) {
                case 'basic': case 'cors': case 'default': return true;
            }
            return false;
        }
    }

    function initSync(module) {
        if (wasm !== undefined) return wasm;


        if (module !== undefined) {
            if (Object.getPrototypeOf(module) === Object.prototype) {
                ({module} = module)
            } else {
                console.warn('using deprecated parameters for `initSync()`; pass a single object instead')
            }
        }

        const imports = __wbg_get_imports();
        if (!(module instanceof WebAssembly.Module)) {
            module = new WebAssembly.Module(module);
        }
        const instance = new WebAssembly.Instance(module, imports);
        return __wbg_finalize_init(instance, module);
    }

    let __wbg_init_promise;
    async function __wbg_init(module_or_path) {
        if (wasm !== undefined) return wasm;
        if (__wbg_init_promise === undefined) {
            __wbg_init_promise = __wbg_init_once(module_or_path);
            __wbg_init_promise.catch(() => { __wbg_init_promise = undefined; });
        }
        return __wbg_init_promise;
    }

    async function __wbg_init_once(module_or_path) {

        if (module_or_path !== undefined) {
            if (Object.getPrototypeOf(module_or_path) === Object.prototype) {
                ({module_or_path} = module_or_path)
            } else {
                console.warn('using deprecated parameters for the initialization function; pass a single object instead')
            }
        }

        if (module_or_path === undefined && script_src !== undefined) {
            module_or_path = script_src.replace(/\.js$/, "_bg.wasm");
        }
        const imports = __wbg_get_imports();

        if (typeof module_or_path === 'string' || (typeof Request === 'function' && module_or_path instanceof Request) || (typeof URL === 'function' && module_or_path instanceof URL)) {
            module_or_path = fetch(module_or_path);
        }

        const { instance, module } = await __wbg_load(await module_or_path, imports);

        return __wbg_finalize_init(instance, module);
    }

    return Object.assign(__wbg_init, { initSync }, exports);
})({ __proto__: null });
